/**
 * `plugcheck listen`: runs the listener until SIGINT/SIGTERM, then closes cleanly. Every listener event
 * is one line on stderr (at most eventLinesPerWindow per eventWindowMs, then a line counting the rest:
 * a flood of strangers must not bury the operator's log) and, with --events FILE, one JSON line
 * appended to FILE (every event the disk keeps up with, rotated: events-file.ts; a
 * failing file is a warning, never the listener's end). --retain prunes old ended runs on a timer.
 */
import { performance } from 'node:perf_hooks'
import { RateLimitedLog } from './rate-limited-log.js'
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import { PlugcheckError, describeSystemError, exitCodes, runtimeError, usageError } from '../../base/errors.js'
import type { Io } from '../../base/io.js'
import type { CampaignState } from '../../protocol/messages.js'
import { describeEvent, type ListenerEvent } from './events.js'
import { EventsFile } from './events-file.js'
import { BindError, Listener } from './listener.js'
import { notePaths } from './created-paths.js'
import { Campaign } from '../campaign/campaign.js'
import { campaignFilePath, readCampaignFile } from '../campaign/campaign-file-io.js'
import type { CampaignOptions } from '../campaign/campaign-types.js'
import { campaignFileSchema } from '../../store/campaign-file.js'
import type { QuotaLimits, Reserve } from './quotas.js'
import { selectPrunableChecked } from './prune.js'
import { formatDurationFlag } from '../../base/durations.js'

const eventLinesPerWindow = 50
const eventWindowMs = 10_000

export interface ListenOptions {
  readonly host: string
  readonly port: number
  readonly dir: string
  readonly token?: string
  readonly maxConnections?: number
  /** Connections that have not said hello yet (--max-pending-hellos). */
  readonly maxPendingHandshakes?: number
  /** Also append every event as a JSON line here. */
  readonly eventsFile?: string
  readonly quotas?: Partial<QuotaLimits>
  readonly reserve?: Reserve
  /** Prune ended runs older than this, on a timer (--retain). */
  readonly retainMs?: number
  readonly campaign?: CampaignOptions
}

/** The campaign's state as its file says (or a new campaign's first); the engine checks the file properly. */
function storedCampaignState(dir: string, options: CampaignOptions): CampaignState {
  const fresh: CampaignState = { name: options.name, cycles: options.cycles, cycle: 1, phase: 'waiting-for-writer' }
  try {
    const parsed = campaignFileSchema.safeParse(JSON.parse(readFileSync(campaignFilePath(dir, options.name), 'utf8')))
    if (!parsed.success) return fresh
    const { name, cycles, cycle, phase } = parsed.data
    return { name, cycles, cycle, phase }
  } catch {
    return fresh
  }
}

/** 127.0.0.0/8, ::1, localhost: only this machine can connect. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1' || host === '0:0:0:0:0:0:0:1') return true
  if (isIP(host) === 4) return host.startsWith('127.')
  return /^::ffff:127\./i.test(host)
}

/** Prints events on stderr, one line each, at most eventLinesPerWindow per window. */
function eventPrinter(io: Io): (event: ListenerEvent) => void {
  const log = new RateLimitedLog(
    (line) => io.err(`${line}\n`),
    eventLinesPerWindow,
    eventWindowMs,
    (n, windowS) => `plugcheck: ${n} more events in the last ${windowS} s were not shown (--events FILE keeps every one)`,
  )
  return (event) => log.line(describeEvent(event))
}

/** How often --retain looks for runs to prune: a tenth of the age, within [1 s, 1 h]. */
function retainIntervalMs(retainMs: number): number {
  return Math.min(3_600_000, Math.max(1_000, Math.floor(retainMs / 10)))
}

/**
 * For tests only: PLUGCHECK_TEST_RETAIN_TICK_MS=N (an integer from 100 to 3,600,000) sets the period of
 * --retain's passes, and each pass then says on stderr when it has selected its runs and when it is
 * done, so a test waits for a pass instead of sleeping through ticks. The age a run must reach is
 * --retain's whatever the period; any other value is refused (exit 2), never taken for a default.
 */
const retainTickEnv = 'PLUGCHECK_TEST_RETAIN_TICK_MS'
const retainTickMsMin = 100
const retainTickMsMax = 3_600_000

function retainTickOverrideMs(env: NodeJS.ProcessEnv): number | undefined {
  const raw = env[retainTickEnv]
  if (raw === undefined) return undefined
  const ms = /^\d{1,7}$/.test(raw) ? Number(raw) : Number.NaN
  if (!(ms >= retainTickMsMin && ms <= retainTickMsMax)) {
    throw usageError(`${retainTickEnv}=${raw} is not a period in ms from ${retainTickMsMin} to ${retainTickMsMax} (it is for tests only)`)
  }
  return ms
}

/** What drives the retention passes: their period, and where a test's pass lines go (none for users). */
interface RetentionTick {
  readonly intervalMs: number
  readonly trace?: (line: string) => void
}

/**
 * Prunes the listener's ended runs older than retainMs on a timer, group by group (each whole or not
 * at all: one group that cannot go keeps no other back); a failure is a warning event.
 */
function startRetention(listener: Listener, retainMs: number, tick: RetentionTick): () => Promise<void> {
  let passes = 0
  let running: Promise<void> | undefined
  // Ages are measured against the earlier of the wall clock and the wall clock at start plus the
  // monotonic time since: a clock stepped forward (NTP at boot) cannot make a run that just ended
  // look old, and one stepped back makes runs look younger (kept longer), never older.
  const wallAtStartMs = Date.now()
  const perfAtStartMs = performance.now()
  const nowForAgesMs = (): number => Math.min(Date.now(), wallAtStartMs + (performance.now() - perfAtStartMs))
  const said = new Set<string>()
  let stopped = false
  let stop = (): void => undefined
  const stopping = new Promise<void>((resolve) => (stop = resolve))
  const pass = (): void => {
    if (running !== undefined) return
    const n = ++passes
    running = (async () => {
      // After the background check (runs taken from the catalog held against their files), and each
      // run selected held against its files again: nothing goes on the catalog's word alone.
      // (A stop does not wait for the check: on 100,000 runs it takes half a minute.)
      await Promise.race([listener.store.startScrub(), stopping])
      if (stopped) return
      // Said once, not at every tick (a run kept for what its files say is found again at each).
      const warn = (message: string): void => {
        if (said.has(message)) return
        said.add(message)
        listener.emit({ kind: 'warning', message, atMs: Date.now() })
      }
      const selection = await selectPrunableChecked(
        listener.store,
        nowForAgesMs(),
        retainMs,
        (runId) => listener.isLive(runId),
        warn,
        () => stopped,
      )
      tick.trace?.(`retention pass ${n}: ${selection.groups.length} groups selected`)
      const age = formatDurationFlag(retainMs)
      let runs = 0
      let bytes = 0
      const failed: string[] = []
      for (const group of selection.groups) {
        // A stop waits for the group being pruned, not for the whole pass (the next start prunes the rest).
        if (stopped) break
        const groupBytes = group.reduce((sum, runId) => sum + pruneBytes(listener, runId), 0)
        try {
          await listener.store.prune(group)
          runs += group.length
          bytes += groupBytes
        } catch (error) {
          failed.push(`${group.join(', ')}: ${(error as Error).message}`)
        }
      }
      if (runs > 0) listener.emit({ kind: 'pruned', runs, bytes, olderThan: age, atMs: Date.now() })
      if (failed.length > 0) {
        const what = failed.length === 1 ? 'one group of runs' : `${failed.length} groups of runs`
        listener.emit({
          kind: 'warning',
          message: `could not prune ${what} older than ${age} (each kept whole; tried again in ${formatDurationFlag(tick.intervalMs)}): ${failed.join('; ')}`,
          atMs: Date.now(),
        })
      }
      tick.trace?.(`retention pass ${n} done`)
    })().finally(() => (running = undefined))
  }
  pass()
  const timer = setInterval(pass, tick.intervalMs)
  return async () => {
    stopped = true
    stop()
    clearInterval(timer)
    await running
  }
}

function retentionTick(retainMs: number, io: Io): RetentionTick {
  const overrideMs = retainTickOverrideMs(process.env)
  if (overrideMs === undefined) return { intervalMs: retainIntervalMs(retainMs) }
  return { intervalMs: overrideMs, trace: (line) => io.err(`plugcheck: ${line} (${retainTickEnv})\n`) }
}

function pruneBytes(listener: Listener, runId: string): number {
  const candidate = listener.store.pruneCandidate(runId)
  return 'bytes' in candidate ? candidate.bytes : 0
}

export async function runListen(options: ListenOptions, io: Io): Promise<number> {
  const dir = resolve(options.dir)
  // Before the listener starts: a bad test override of the period is refused with nothing opened.
  const retention = options.retainMs === undefined ? undefined : retentionTick(options.retainMs, io)
  const print = eventPrinter(io)
  const eventsFile = options.eventsFile === undefined ? undefined : new EventsFile(options.eventsFile, io)
  const onEvent = (event: ListenerEvent): void => {
    print(event)
    eventsFile?.append(event)
  }
  /**
   * The campaign engine's state, once it runs: the answer to an agent's campaign-query. Until the
   * engine has opened its file, the answer is what the file says (or a new campaign's first state),
   * never null: an agent that asks in that moment must not conclude there is no campaign.
   */
  let campaignState: (() => CampaignState | null) | undefined
  if (options.campaign !== undefined) {
    // Other options than the stored campaign's (exit 2), or a damaged campaign file (exit 3), are refused
    // here, before the listener opens its store, binds its port or says it listens: the refusal alone.
    // (Campaign.open reads the file again, with the directory locked, and acts on that reading.)
    await readCampaignFile(dir, options.campaign)
    const stored = storedCampaignState(dir, options.campaign)
    campaignState = () => stored
  }
  const created = await notePaths(dir)
  let listener: Listener
  try {
    listener = await Listener.start({
      ...options,
      dir,
      log: (line) => io.err(`${line}\n`),
      onEvent,
      campaignState: () => campaignState?.() ?? null,
    })
  } catch (error) {
    // A configuration problem (another listener holds --dir) is reported as it is: exit 2.
    if (error instanceof PlugcheckError && error.exitCode === exitCodes.usage) throw error
    if (error instanceof BindError) {
      // Nothing was stored: what this start made in --dir goes, and the port is named.
      await eventsFile?.close()
      await created.removeCreated().catch(() => undefined)
      throw runtimeError(
        `could not listen on ${options.host}:${options.port}: ${describeSystemError(error)}`,
        error.code === 'EADDRINUSE' ? `another program listens on ${options.port}: stop it, or choose --port` : undefined,
      )
    }
    throw runtimeError(`could not listen on ${options.host}:${options.port} with acks in ${dir}: ${describeSystemError(error)}`)
  }
  const address = listener.address()
  const shown = address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
  io.out(`listening on ${shown}, storing acks in ${dir}\n`)
  if (options.token === undefined && !isLoopbackHost(options.host)) {
    io.err(
      `plugcheck: warning: listening on ${shown} without --token: anyone who can reach this port can announce runs, and a run announced for another machine's host and path shadows the real one in verify\n` +
        'hint: start the listener and every writer and verifier with the same --token SECRET (it crosses the network in clear text), or listen on a trusted network only\n',
    )
  }
  // campaign engine starts here (it sets campaignState, and emits through listener.emit)
  let campaign: Campaign | undefined
  if (options.campaign !== undefined) {
    try {
      campaign = await Campaign.open(dir, options.campaign, listener)
    } catch (error) {
      // A damaged campaign file (exit 3) or other options than the stored campaign's (exit 2): no listener.
      await listener.close()
      await eventsFile?.close()
      throw error
    }
    const opened = campaign
    campaignState = () => opened.state()
  }
  const stopRetention =
    options.retainMs === undefined || retention === undefined ? undefined : startRetention(listener, options.retainMs, retention)
  await new Promise<void>((done) => {
    process.once('SIGINT', done)
    process.once('SIGTERM', done)
  })
  await stopRetention?.()
  await campaign?.close()
  await listener.close()
  await eventsFile?.close()
  io.err('plugcheck: listener stopped; every ack it reported as recorded is on disk\n')
  return 0
}
