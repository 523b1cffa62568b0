/**
 * `plugcheck listen`: runs the listener until SIGINT/SIGTERM, then closes cleanly. Every listener event
 * is one line on stderr (at most eventLinesPerWindow per eventWindowMs, then a line counting the rest:
 * a flood of strangers must not bury the operator's log) and, with --events FILE, one JSON line
 * appended to FILE (every event; a failing file is a warning, never the listener's end).
 */
import { RateLimitedLog } from './rate-limited-log.js'
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import { PlugcheckError, describeSystemError, exitCodes, runtimeError } from '../errors.js'
import type { Io } from '../client/writer.js'
import type { CampaignState } from '../protocol/messages.js'
import { describeEvent, type ListenerEvent } from './events.js'
import { Listener } from './listener.js'
import { Campaign, campaignFilePath } from './campaign.js'
import { campaignFileSchema } from './campaign-file.js'

const eventLinesPerWindow = 50
const eventWindowMs = 10_000

export interface CampaignOptions {
  readonly name: string
  readonly cycles: number
  readonly cutCommand: string
  /** [min, max] seconds after the writer is steady. */
  readonly cutAfterS: readonly [number, number]
  readonly rebootTimeoutS: number
  /** Seed of the cut moments; random (and logged) when absent. */
  readonly seed?: number
}

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
  const log = new RateLimitedLog((line) => io.err(line + '\n'), eventLinesPerWindow, eventWindowMs, (n, windowS) => `plugcheck: ${n} more events in the last ${windowS} s were not shown (--events FILE keeps every one)`)
  return (event) => log.line(describeEvent(event))
}

/**
 * Appends each event to path as one JSON line, written by one write() in append mode so that lines
 * never interleave or tear in the middle (a reader sees whole lines). A failure is reported once
 * (until a write succeeds again) and never stops the listener.
 */
class EventsFile {
  private fd: number | undefined
  private failing = false
  constructor(
    private readonly path: string,
    private readonly io: Io,
  ) {}
  append(event: ListenerEvent): void {
    const line = Buffer.from(JSON.stringify(event) + '\n')
    try {
      this.fd ??= openSync(this.path, 'a', 0o644)
      const written = writeSync(this.fd, line)
      if (written !== line.length) throw Object.assign(new Error(`short write: ${written} of ${line.length} bytes (disk full?)`), { code: 'ENOSPC' })
      this.failing = false
    } catch (error) {
      if (!this.failing) this.io.err(`plugcheck: warning: could not append to the events file ${this.path}: ${describeSystemError(error)}; the listener goes on (events still go to stderr)\n`)
      this.failing = true
      // Opened afresh next time: the file may have been moved, or its file system remounted.
      this.close()
    }
  }
  close(): void {
    if (this.fd === undefined) return
    try {
      closeSync(this.fd)
    } catch {
      // nothing to do: every line was written by then
    }
    this.fd = undefined
  }
}

export async function runListen(options: ListenOptions, io: Io): Promise<number> {
  const dir = resolve(options.dir)
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
    const stored = storedCampaignState(dir, options.campaign)
    campaignState = () => stored
  }
  let listener: Listener
  try {
    listener = await Listener.start({ ...options, dir, log: (line) => io.err(line + '\n'), onEvent, campaignState: () => campaignState?.() ?? null })
  } catch (error) {
    // A configuration problem (another listener holds --dir) is reported as it is: exit 2.
    if (error instanceof PlugcheckError && error.exitCode === exitCodes.usage) throw error
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
      eventsFile?.close()
      throw error
    }
    const opened = campaign
    campaignState = () => opened.state()
  }
  await new Promise<void>((done) => {
    process.once('SIGINT', done)
    process.once('SIGTERM', done)
  })
  await campaign?.close()
  await listener.close()
  eventsFile?.close()
  io.err('plugcheck: listener stopped; every ack it reported as recorded is on disk\n')
  return 0
}
