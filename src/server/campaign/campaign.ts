/**
 * The campaign engine: drives power cuts from the listener. One cycle is
 *
 *   waiting-for-writer --steady--> waiting-to-cut --plannedCutMs--> cutting --cut command exit 0-->
 *   waiting-for-agent --every run of the cycle's group has a verdict--> next cycle (or done)
 *
 * and a cut command that fails, or no agent within the reboot timeout, stops the campaign. Every
 * phase and event is in the table of campaign-transitions.ts, which each step below consults.
 *
 * Fault model: the listener can be killed at any moment (so can the machine it runs on, whose disk
 * keeps what was fsynced). Every state change is written whole to <dir>/campaigns/<name>.json
 * (temporary file, fsync, rename, directory fsync) BEFORE it is acted on: the cut moment is on disk
 * before the cut command runs, so a restarted listener never runs the command twice for a cycle
 * (after a kill in `cutting` it assumes the command ran and waits for the agent); a cycle advances
 * only on disk, so it is never counted twice or lost. If the file cannot be written the campaign
 * halts where it is (no cut is made) and says so; a restart resumes from the last state on disk.
 *
 * Everything from the network (events of runs the listener accepted) is matched against the file:
 * only runs tagged with this campaign's name and current cycle move it.
 *
 * Apart: the cut command's run (cut-command.ts), the file's reads and writes (campaign-file-io.ts),
 * the checks of a file read back (campaign-resume.ts), and the engine's options and events
 * (campaign-types.ts).
 */
import { assert } from '../../base/assert.js'
import { describeSystemError } from '../../base/errors.js'
import type { CampaignState, CampaignTag } from '../../protocol/messages.js'
import { campaignStep, movesTo, takes } from './campaign-transitions.js'
import { campaignFileSchema, campaignFileVersion, type CampaignFile, type CycleRecord } from '../../store/campaign-file.js'
import type { CampaignInputEvent, CampaignListener, CampaignOptions } from './campaign-types.js'
import { campaignFilePath, createCampaignFile, readCampaignFile, writeCampaignFile } from './campaign-file-io.js'
import { runCutCommand, type CutResult } from './cut-command.js'
import { cutDelayMs, newCycle } from './campaign-cycle.js'
import { retryCycle } from './campaign-resume.js'

/** Events kept while the campaign file is loaded (runs, steadies and verdicts are a few per cycle). */
const maxEarlyEvents = 10_000

const seconds = (ms: number): string => `${Math.round(ms / 100) / 10} s`

export class Campaign {
  private cutTimer: NodeJS.Timeout | undefined
  private rebootTimer: NodeJS.Timeout | undefined
  /** State changes run one at a time, in order: each is on disk before the next starts. */
  private queue: Promise<void> = Promise.resolve()
  /** Runs of the current cycle with a verdict received since the cut. */
  private readonly verdicts = new Set<string>()
  /** Runs whose writer is gone (ended or vanished); after a restart, every run known before it. */
  private readonly ended = new Set<string>()
  private halted = false
  private closed = false
  private readonly onEvent = (event: CampaignInputEvent): void => this.enqueue(() => this.handle(event))

  private constructor(
    private readonly path: string,
    private file: CampaignFile,
    private readonly listener: CampaignListener,
    /** The listener was started with another cut command (allowed for a campaign stopped by a failed cut only). */
    private readonly newCutCommand?: string,
  ) {}

  /**
   * Loads <dir>/campaigns/<name>.json (resumes it) or creates it. A damaged file refuses to start
   * (exit 3); options that differ from the stored campaign's refuse too (exit 2): a resumed campaign
   * is the same campaign.
   */
  static async open(dir: string, options: CampaignOptions, listener: CampaignListener): Promise<Campaign> {
    // Events that arrive while the file is read or written are kept and handled after: a writer can
    // announce its run the moment the listener accepts connections.
    const early: CampaignInputEvent[] = []
    const collect = (event: CampaignInputEvent): void => void (early.length < maxEarlyEvents && early.push(event))
    listener.events.on('event', collect)
    let campaign: Campaign
    let resumed: boolean
    try {
      ;[campaign, resumed] = await Campaign.load(dir, options, listener)
    } finally {
      listener.events.off('event', collect)
    }
    listener.events.on('event', campaign.onEvent)
    if (resumed) campaign.enqueue(() => campaign.resume())
    for (const event of early) campaign.onEvent(event)
    await campaign.queue
    return campaign
  }

  private static async load(dir: string, options: CampaignOptions, listener: CampaignListener): Promise<[Campaign, boolean]> {
    const path = campaignFilePath(dir, options.name)
    const stored = await readCampaignFile(dir, options)
    if (stored !== undefined) return [new Campaign(path, stored.file, listener, stored.newCutCommand), true]
    const file = await createCampaignFile(dir, options)
    const campaign = new Campaign(path, file, listener)
    campaign.log(
      `started: ${file.cycles} cycles, cut ${file.cutAfterS[0]}-${file.cutAfterS[1]} s after the writer is steady (seed ${file.seed}), ` +
        `reboot timeout ${file.rebootTimeoutS} s, cut command: ${file.cutCommand}; state in ${path}`,
    )
    campaign.log(`cycle 1 of ${file.cycles}: waiting for the agent's writer`)
    return [campaign, false]
  }

  /** What the agent asks for (campaign-query). */
  state(): CampaignState {
    const { name, cycles, cycle, phase, detail } = this.file
    return { name, cycles, cycle, phase, ...(detail === undefined ? {} : { detail }) }
  }

  /** The durable state as it is now (a copy). */
  snapshot(): CampaignFile {
    return structuredClone(this.file)
  }

  /** Stops listening and timing; a cut command under way is left to finish (the power may be going). */
  async close(): Promise<void> {
    this.closed = true
    this.listener.events.off('event', this.onEvent)
    clearTimeout(this.cutTimer)
    clearTimeout(this.rebootTimer)
    await this.queue
  }

  private log(message: string): void {
    this.listener.emit({ kind: 'campaign', name: this.file.name, message, atMs: Date.now() })
  }

  private enqueue(step: () => Promise<void> | void): void {
    this.queue = this.queue.then(async () => {
      if (this.halted || this.closed) return
      try {
        await step()
      } catch (error) {
        this.halt(error)
      }
    })
  }

  /** The file could not be written: act on nothing more (a restart resumes from the last state on disk). */
  private halt(error: unknown): void {
    this.halted = true
    clearTimeout(this.cutTimer)
    clearTimeout(this.rebootTimer)
    this.log(
      `could not record its state in ${this.path}: ${describeSystemError(error)}; the campaign is halted and makes no cut; restart the listener to resume it`,
    )
  }

  private get current(): CycleRecord {
    const record = this.file.history[this.file.cycle - 1]
    // parseCampaignFile refuses a file without a record of its cycle, and every commit keeps one.
    assert(
      record !== undefined && record.cycle === this.file.cycle,
      () => `campaign ${this.file.name}: no record of cycle ${this.file.cycle}`,
    )
    return record
  }

  /** Applies a change to a copy, writes it durably, and only then makes it the state acted on. */
  private async commit(change: (next: CampaignFile, record: CycleRecord) => void): Promise<void> {
    const next = structuredClone(this.file)
    next.version = campaignFileVersion // a file of an older listener is written in this version's format from its first change
    change(next, next.history[next.cycle - 1]!)
    campaignFileSchema.parse(next) // a programmer error if the engine builds a file it would refuse to load
    await writeCampaignFile(this.path, next)
    this.file = next
  }

  private async resume(): Promise<void> {
    const { phase, cycle, cycles } = this.file
    // The listener restarted: no writer of before is connected any more.
    for (const record of this.file.history) for (const id of record.runIds) this.ended.add(id)
    const where = `resumed in cycle ${Math.min(cycle, cycles)} of ${cycles}, ${phase}`
    switch (phase) {
      case 'done':
        this.log(`already done: ${cycles} cycles; nothing to do (give another --campaign name for a new campaign)`)
        return
      case 'stopped':
        if (this.newCutCommand !== undefined) return this.retryWithNewCutCommand(this.newCutCommand)
        this.log(`stopped in cycle ${cycle} of ${cycles}${this.file.detail === undefined ? '' : `: ${this.file.detail}`}; nothing to do`)
        return
      case 'waiting-for-writer':
        this.log(`${where}: waiting for the agent's writer`)
        return
      case 'waiting-to-cut': {
        const plannedCutMs = this.current.plannedCutMs!
        this.log(
          `${where}: the cut is planned for ${new Date(plannedCutMs).toISOString()}${plannedCutMs <= Date.now() ? ', which has passed: cutting now' : ''}`,
        )
        this.armCut(plannedCutMs)
        return
      }
      case 'cutting':
        // The command may have run (the cut moment was on disk before it started): never run it twice.
        await this.commit((next) => {
          next.phase = movesTo(phase, 'restarted')!
          next.detail = 'the listener restarted while the cut command ran; it is not run again'
        })
        this.log(`${where}: the listener stopped while the cut command ran; it is not run again; waiting for the agent`)
        this.recallVerdicts()
        this.armReboot()
        return
      case 'waiting-for-agent':
        this.log(`${where}: waiting for the agent`)
        this.recallVerdicts()
        this.armReboot()
        return
    }
  }

  /** Stopped by a failed cut, started again with another cut command: the cycle is written again (retryCycle). */
  private async retryWithNewCutCommand(to: string): Promise<void> {
    const { cycle, cycles, cutCommand: from, detail } = this.file
    await this.commit((next) => retryCycle(next, to, Date.now()))
    this.log(
      `the cut command changed from ${JSON.stringify(from)} to ${JSON.stringify(to)}${detail === undefined ? '' : ` (stopped: ${detail})`}; ` +
        `cycle ${cycle} of ${cycles} is written again: waiting for the agent's writer (start the agent again if it is not running)`,
    )
  }

  /** Verdicts the listener stored while the campaign was not watching (between a restart and now). */
  private recallVerdicts(): void {
    const summaries = this.listener.store?.summaries?.(this.file.name) ?? []
    const runIds = new Set(this.current.runIds)
    // Only a verdict given after this cycle's cut says the agent came back from it.
    const cutMs = this.current.cutMs ?? Infinity
    for (const s of summaries) if (runIds.has(s.runId) && s.verdict != null && s.verdict.atMs >= cutMs) this.verdicts.add(s.runId)
    if (runIds.size > 0 && [...runIds].every((id) => this.verdicts.has(id))) this.enqueue(() => this.cameBack())
  }

  private armCut(plannedCutMs: number): void {
    if (this.closed) return // a step that was under way when the listener closed arms nothing (no timer keeps the process alive)
    clearTimeout(this.cutTimer)
    const cycle = this.file.cycle
    this.cutTimer = setTimeout(() => this.enqueue(() => this.cut(cycle)), Math.max(0, plannedCutMs - Date.now()))
  }

  private armReboot(): void {
    if (this.closed) return // a step that was under way when the listener closed arms nothing (no timer keeps the process alive)
    clearTimeout(this.rebootTimer)
    const cycle = this.file.cycle
    const deadlineMs = this.current.cutMs! + this.file.rebootTimeoutS * 1000
    this.rebootTimer = setTimeout(() => this.enqueue(() => this.rebootTimedOut(cycle)), Math.max(0, deadlineMs - Date.now()))
  }

  private ours(tag: CampaignTag | null): boolean {
    return tag !== null && tag.name === this.file.name && tag.cycle === this.file.cycle
  }

  private async handle(event: CampaignInputEvent): Promise<void> {
    if (event.kind === 'end' || event.kind === 'vanished') {
      this.ended.add((event as unknown as { runId: string }).runId)
      return
    }
    if (event.kind === 'run') {
      const e = event as Extract<CampaignInputEvent, { kind: 'run' }>
      if (this.ours(e.campaign)) await this.runAnnounced(e)
    } else if (event.kind === 'steady') {
      const e = event as Extract<CampaignInputEvent, { kind: 'steady' }>
      if (takes(this.file.phase, 'steady') && e.groupId === this.current.groupId && this.current.runIds.includes(e.runId))
        await this.steady(e.atMs)
    } else if (event.kind === 'verdict') {
      const e = event as Extract<CampaignInputEvent, { kind: 'verdict' }>
      if (takes(this.file.phase, 'verdict') && this.current.runIds.includes(e.runId)) {
        this.verdicts.add(e.runId)
        if (this.current.runIds.every((id) => this.verdicts.has(id))) await this.cameBack()
      }
    }
  }

  private async runAnnounced(e: Extract<CampaignInputEvent, { kind: 'run' }>): Promise<void> {
    // A campaign done has no record of a current cycle to tell the two apart: a phase that drops both drops the run here.
    if (!takes(this.file.phase, 'member-announced') && campaignStep(this.file.phase, 'writer-announced').kind === 'ignore') return
    const record = this.current
    if (record.groupId === e.groupId) {
      if (record.runIds.includes(e.runId) || !takes(this.file.phase, 'member-announced')) return
      await this.commit((_, r) => void r.runIds.push(e.runId))
      return
    }
    const nextPhase = movesTo(this.file.phase, 'writer-announced')
    if (nextPhase === undefined) {
      if (campaignStep(this.file.phase, 'writer-announced').kind === 'ignore') return
      this.log(
        `cycle ${this.file.cycle}: ignored run ${e.runId} of ${e.host}:${e.path}: it was announced after the cut (${this.file.phase}); the agent starts a cycle's writer only after it reported the verdicts`,
      )
      return
    }
    // A new writer for this cycle (the agent restarted it): the cycle follows the newest group, but
    // only once the current group's writer is gone. While it is live, another group tagged with this
    // cycle is a second writer or a stranger (without --token anyone can send a tag): ignored.
    if (record.groupId !== null && record.runIds.some((id) => !this.ended.has(id))) {
      this.log(
        `cycle ${this.file.cycle}: ignored run ${e.runId} of ${e.host}:${e.path} (group ${e.groupId}): the cycle's writer (group ${record.groupId}) is still connected`,
      )
      return
    }
    const replaced = record.groupId
    clearTimeout(this.cutTimer)
    await this.commit((next, r) => {
      Object.assign(r, newCycle(r.cycle), { groupId: e.groupId, runIds: [e.runId], host: e.host, path: e.path })
      next.phase = nextPhase
      delete next.detail
    })
    this.log(
      `cycle ${this.file.cycle}: writer on ${e.host}:${e.path} announced (group ${e.groupId})` +
        (replaced === null ? '' : `; it replaces group ${replaced}, and the cut waits for the new writer to be steady`),
    )
  }

  private async steady(atMs: number): Promise<void> {
    const nextPhase = movesTo(this.file.phase, 'steady')
    if (nextPhase === undefined) return
    const delayMs = cutDelayMs(this.file.seed, this.file.cycle, this.file.cutAfterS)
    // From the moment the listener recorded steady: plannedCutMs - steadyMs is the drawn delay exactly.
    const plannedCutMs = atMs + delayMs
    await this.commit((next, r) => {
      r.steadyMs = atMs
      r.plannedCutMs = plannedCutMs
      next.phase = nextPhase
    })
    this.log(`cycle ${this.file.cycle}: the writer is steady; cut planned in ${seconds(delayMs)} (seed ${this.file.seed})`)
    this.armCut(plannedCutMs)
  }

  private async cut(cycle: number): Promise<void> {
    const nextPhase = movesTo(this.file.phase, 'cut-due')
    if (nextPhase === undefined || this.file.cycle !== cycle) return
    // A timer runs on the monotonic clock and may fire a moment before the wall clock reaches the plan: wait for the rest.
    const cutMs = Date.now()
    if (cutMs < this.current.plannedCutMs!) return this.armCut(this.current.plannedCutMs!)
    // On disk before the command starts: a restart from here on never runs it again.
    await this.commit((next, r) => {
      r.cutMs = cutMs
      next.phase = nextPhase
    })
    this.verdicts.clear()
    this.log(`cycle ${cycle}: cutting now: ${this.file.cutCommand}`)
    runCutCommand(this.file.cutCommand, (result) => this.enqueue(() => this.cutDone(cycle, result)))
  }

  private async cutDone(cycle: number, result: CutResult): Promise<void> {
    const ok = result.exitCode === 0
    const detail = ok ? undefined : `the cut command ${result.failure}`
    await this.commit((next) => {
      const r = next.history[cycle - 1]!
      r.cutExitCode = result.exitCode
      r.cutOutput = result.output
      // The agent may already be back (a fast power cycle): then only the command's result is recorded.
      if (next.cycle !== cycle) return
      const nextPhase = movesTo(next.phase, ok ? 'cut-ok' : 'cut-failed')
      if (nextPhase === undefined) return
      next.phase = nextPhase
      if (!ok) {
        r.outcome = 'cut-failed'
        next.detail = `cycle ${cycle}: ${detail}`
      }
    })
    const tail = result.output.trim().split('\n').slice(-3).join(' | ')
    this.log(`cycle ${cycle}: cut command ${result.failure}${tail === '' ? '' : `; output: ${tail}`}`)
    if (this.file.cycle !== cycle) return
    if (this.file.phase === 'waiting-for-agent') {
      this.log(`cycle ${cycle}: waiting for the agent up to ${this.file.rebootTimeoutS} s after the cut`)
      this.armReboot()
    } else if (this.file.phase === 'stopped') {
      this.log(
        `STOPPED in cycle ${cycle}: ${detail}; the agent's writer is told to stop; fix the command and start the listener again with the same options and the new --cut-command: cycle ${cycle} is written again`,
      )
    }
  }

  private async cameBack(): Promise<void> {
    const cycle = this.file.cycle
    const nextPhase = movesTo(this.file.phase, cycle >= this.file.cycles ? 'last-verdicts-in' : 'verdicts-in')
    if (nextPhase === undefined) return
    clearTimeout(this.rebootTimer)
    const cameBackMs = Date.now()
    const runs = this.current.runIds.length
    await this.commit((next, r) => {
      r.cameBackMs = cameBackMs
      r.outcome = 'verdict'
      delete next.detail
      next.cycle = cycle + 1
      next.phase = nextPhase
      if (nextPhase !== 'done') next.history.push(newCycle(cycle + 1))
    })
    this.verdicts.clear()
    const afterS =
      this.file.history[cycle - 1]!.cutMs === null ? '' : `, ${seconds(cameBackMs - this.file.history[cycle - 1]!.cutMs!)} after the cut`
    this.log(`cycle ${cycle}: verdicts in for ${runs} run${runs === 1 ? '' : 's'}${afterS}`)
    this.log(
      this.state().phase === 'done'
        ? `campaign done: ${this.file.cycles} cycles`
        : `cycle ${cycle + 1} of ${this.file.cycles}: waiting for the agent's writer`,
    )
  }

  private async rebootTimedOut(cycle: number): Promise<void> {
    const nextPhase = movesTo(this.file.phase, 'reboot-timeout')
    if (this.file.cycle !== cycle || nextPhase === undefined) return
    const detail = `cycle ${cycle}: no agent came back with the verdicts within ${this.file.rebootTimeoutS} s after the cut`
    await this.commit((next, r) => {
      r.outcome = 'did-not-come-back'
      next.phase = nextPhase
      next.detail = detail
    })
    this.log(`STOPPED: ${detail}; the machine under test did not come back: check it (console, BMC) before anything else`)
  }
}
