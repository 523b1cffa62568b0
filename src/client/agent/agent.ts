/**
 * `plugcheck agent`: what the machine under test starts at boot during a campaign. It verifies the
 * last run of this host and path (as `verify` does) and reports the verdicts to the listener, then, if
 * the listener's campaign has cycles left, writes the next cycle until the power goes.
 *
 * Fault model: at boot the network (or the listener) may come up late, so the first contact is
 * retried for a bounded time. A run the listener still holds open is never given a verdict: its
 * writer may be alive (the agent started twice, or before the cut), and a verdict on a live run would
 * end a campaign cycle that was never cut. The agent writes only through writeCommand (runWrite, or runJobs for --jobs), so it replaces
 * nothing but its own data files (a foreign file at --file is refused exactly as `write` refuses it).
 */
import { performance } from 'node:perf_hooks'
import { hostname } from 'node:os'
import { dirname } from 'node:path'
import { PlugcheckError, exitCodes, runtimeError } from '../../base/errors.js'
import type { CampaignState } from '../../protocol/messages.js'
import { listenerTimeoutMs as defaultListenerTimeoutMs } from '../../protocol/endpoint.js'
import { formatEndpoint } from '../../protocol/endpoint.js'
import { listRuns, queryCampaign, queryRuns, reportVerdicts } from '../verify/listener-client.js'
import { printedReport, verifyReport } from '../verify/verify.js'
import { storedVerdicts } from '../verify/stored-verdicts.js'
import { validateWriteFlags, type WriteOptions } from '../write/write-options.js'
import { writeCommand } from '../write/jobs.js'
import { writerEnvironment } from '../environment.js'
import type { Io } from '../../base/io.js'
import { oneLine } from '../../base/printable.js'
import { printService, type ServiceKind } from './service.js'

export interface AgentOptions extends Omit<WriteOptions, 'durationS' | 'traceFile' | 'campaign'> {
  /** Print a service definition that starts this agent at boot, and exit. */
  readonly printService?: ServiceKind
  /** --token-file, absolute: where the token came from (the service loads it from there too). */
  readonly tokenFile?: string
}

/** At boot the network may come up late: the first contact with the listener is retried this long. */
export const listenerWaitMs = 5 * 60_000
const waitMessageIntervalMs = 30_000
const retryIntervalMs = 1000
/** After the verdicts, the campaign moves to the next cycle on its own schedule: asked again this often, within the listener time-out. */
const campaignPollIntervalMs = 200
/** While it writes a cycle, the agent asks the campaign this often whether it stopped (watchCampaign). */
const campaignWatchIntervalMs = 2000

/** argv is the agent's own command line, for --print-service to repeat. */
export async function runAgent(options: AgentOptions, argv: readonly string[], io: Io): Promise<number> {
  if (options.printService !== undefined) {
    const service = printService(options.printService, {
      argv,
      file: options.file,
      ...(options.token === undefined ? {} : { token: options.token }),
      ...(options.tokenFile === undefined ? {} : { tokenFile: options.tokenFile }),
    })
    io.out(service.definition)
    if (service.steps !== '') io.err(service.steps)
    return exitCodes.ok
  }
  validateWriteFlags(options)
  const timeoutMs = options.listenerTimeoutMs ?? defaultListenerTimeoutMs
  const where = formatEndpoint(options.server)
  let campaign = await untilListenerAnswers(() => queryCampaign(options.server, options.token, timeoutMs), where, io)

  // 1. The last run of this host and path: verified and reported unless every run of its group has a verdict.
  let exitCode: number = exitCodes.ok
  /** The files of the run this agent just verified: its own, to be replaced by the next cycle's. */
  let ownPaths = new Set<string>()
  const latest = await queryRuns(options.server, options.token, { host: hostname(), requestedPath: options.file }, timeoutMs)
  if (latest.runs.length === 0) {
    io.out(`no earlier run of ${hostname()}:${options.file} at the listener ${where}: nothing to verify\n`)
  } else {
    const groupId = latest.runs[0]!.meta.groupId
    const { runs: summaries } = await listRuns(options.server, options.token, timeoutMs)
    const unjudged = latest.runs.filter((r) => summaries.find((s) => s.runId === r.meta.runId)?.verdict == null)
    if (unjudged.length === 0) {
      io.out(`the latest run of ${options.file} (group ${groupId}) has its verdicts at the listener already\n`)
    } else {
      const outcome = await verifyReport(
        {
          source: { server: options.server },
          file: options.file,
          json: false,
          listenerTimeoutMs: timeoutMs,
          ...(options.token === undefined ? {} : { token: options.token }),
        },
        io,
      )
      io.out(printedReport(outcome.report, false))
      const live = new Set(outcome.report.claims.filter((c) => c.live).map((c) => c.runId))
      const report = outcome.report
      if (report.verdict === 'not-judged' && (report.reason === 'still-running' || (report.groupRunIds ?? []).some((id) => live.has(id)))) {
        // Its writer may be alive: a verdict now would end a cycle that was never cut. Nothing is reported, nothing written.
        io.err(`plugcheck: not reporting a verdict for a run that is still being written, and not starting another\n`)
        return outcome.exitCode
      }
      const machine = writerEnvironment(dirname(options.file))
      const verdicts = storedVerdicts(outcome.report, machine.bootId, machine.fingerprint)
      await reportVerdicts(options.server, options.token, timeoutMs, verdicts)
      // A cut may have destroyed a superblock: the next write would refuse the file as not plugcheck's.
      // It is: this host's latest run at this path wrote it, and it was judged just now.
      ownPaths = new Set(latest.runs.filter((r) => r.meta.host === hostname()).map((r) => r.meta.path))
      io.out(`reported ${verdicts.length} verdict${verdicts.length === 1 ? '' : 's'} to the listener ${where}\n`)
      exitCode = outcome.exitCode
      campaign = await campaignAfterVerdicts(() => queryCampaign(options.server, options.token, timeoutMs), timeoutMs)
    }
  }

  // 2. The next cycle, if the campaign has one.
  if (campaign === null) {
    io.out(`the listener runs no campaign: nothing to write\n`)
    return exitCode
  }
  if (campaign.phase === 'waiting-for-writer' && campaign.cycle <= campaign.cycles) {
    io.out(`campaign ${campaign.name}: cycle ${campaign.cycle} of ${campaign.cycles}: writing until the power goes\n`)
    // No --duration: the run ends when the power does, or when the campaign stops without a cut (a
    // failed cut command): then the writer is told to stop. The last run was verified above (or had
    // its verdicts, or there was none): nothing unverified is discarded.
    const watch = watchCampaign(() => queryCampaign(options.server, options.token, timeoutMs), campaign.name)
    try {
      const written = await writeCommand(
        {
          ...options,
          ownPaths,
          discardUnverified: true,
          campaign: { name: campaign.name, cycle: campaign.cycle },
          stopRequest: watch.stopReason,
        },
        io,
      )
      // A loss found above is this invocation's finding: the next cycle's write stopping (a failed cut: 3) must not hide it.
      return exitCode === exitCodes.lossFound ? exitCode : written
    } catch (error) {
      if (exitCode !== exitCodes.lossFound || !(error instanceof PlugcheckError)) throw error
      io.err(`plugcheck: ${error.message}\n${error.hint === undefined ? '' : `hint: ${error.hint}\n`}`)
      return exitCode
    } finally {
      watch.release()
    }
  }
  io.out(`${describeCampaign(campaign)}: nothing to write\n`)
  return exitCode
}

function describeCampaign(c: CampaignState): string {
  if (c.phase === 'done') return `campaign ${c.name} is done (${c.cycles} cycles)`
  if (c.phase === 'stopped') return `campaign ${c.name} stopped${c.detail === undefined ? '' : `: ${oneLine(c.detail)}`}`
  return `campaign ${c.name} is in cycle ${Math.min(c.cycle, c.cycles)} of ${c.cycles}, ${c.phase}${c.detail === undefined ? '' : ` (${oneLine(c.detail)})`}`
}

/**
 * The first contact: retried while the listener cannot be reached (exit-3 failures: refused, timed
 * out, no route, a name not yet resolvable), for at most listenerWaitMs, saying so every 30 s.
 * A refusal the operator must fix (a wrong token, another protocol) is not retried.
 */
async function untilListenerAnswers<T>(ask: () => Promise<T>, where: string, io: Io): Promise<T> {
  // Monotonic: NTP stepping the clock at boot (the moment the agent runs) must not end the wait early.
  const startMs = performance.now()
  let nextMessageMs = startMs
  for (let attempt = 1; ; attempt++) {
    try {
      return await ask()
    } catch (error) {
      if (!(error instanceof PlugcheckError) || error.exitCode !== exitCodes.runtime) throw error
      const waitedMs = performance.now() - startMs
      if (waitedMs >= listenerWaitMs) {
        throw runtimeError(
          `the listener at ${where} could not be reached for ${listenerWaitMs / 1000} s (${attempt} attempts): ${error.message}`,
          'start `plugcheck listen` there, and check host, port and firewall',
        )
      }
      if (performance.now() >= nextMessageMs) {
        io.err(
          `plugcheck: waiting for the listener at ${where} (${Math.round(waitedMs / 1000)} s of ${listenerWaitMs / 1000}): ${error.message}\n`,
        )
        nextMessageMs += waitMessageIntervalMs
      }
      await sleep(Math.min(retryIntervalMs, listenerWaitMs - waitedMs))
    }
  }
}

/** The campaign takes in the verdicts on its own schedule: wait (bounded) until it has left the cycle just verified. */
async function campaignAfterVerdicts(ask: () => Promise<CampaignState | null>, timeoutMs: number): Promise<CampaignState | null> {
  const deadlineMs = performance.now() + timeoutMs
  for (;;) {
    const state = await ask()
    if (state === null || (state.phase !== 'cutting' && state.phase !== 'waiting-for-agent') || performance.now() >= deadlineMs)
      return state
    await sleep(campaignPollIntervalMs)
  }
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms))

/**
 * While the agent writes a cycle, the listener's campaign is asked every campaignWatchIntervalMs
 * (a campaign-query on a connection of its own, answered between the writer's records: the loop
 * yields every 50 ms) whether it still wants the writer. A campaign that stopped (its cut command
 * failed, or no agent came back) makes no cut: without this the writer would write until someone
 * killed it. A query that fails changes nothing: a listener gone is the writer's own connection's
 * business (it fails after --listener-timeout).
 */
export function watchCampaign(
  ask: () => Promise<CampaignState | null>,
  name: string,
  intervalMs = campaignWatchIntervalMs,
): { stopReason: () => string | undefined; release: () => void } {
  let reason: string | undefined
  let timer: NodeJS.Timeout | undefined
  let released = false
  const check = async (): Promise<void> => {
    try {
      const state = await ask()
      if (state !== null && state.name === name && state.phase === 'stopped')
        reason = `campaign ${name} stopped ${state.detail === undefined ? `in cycle ${state.cycle}` : `(${oneLine(state.detail)})`}`
    } catch {
      // the listener did not answer this time: asked again at the next interval
    }
    if (reason === undefined && !released) timer = setTimeout(() => void check(), intervalMs)
  }
  timer = setTimeout(() => void check(), intervalMs)
  return {
    stopReason: () => reason,
    release: () => {
      released = true
      clearTimeout(timer)
    },
  }
}
