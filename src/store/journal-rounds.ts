/**
 * The journal as the ack store keeps it (journal.ts has its format): the segment rounds go to and those
 * not folded yet, one run's commit in a round, the journal as read at start, and the small steps on
 * segments (a failed round cut off, a torn tail cut back, what a fold writes, a state to see changes).
 */
import { constants as fsConstants } from 'node:fs'
import { open, type FileHandle } from 'node:fs/promises'
import { frameCommit, logHeader, maxCommitBytes, maxItemsPerCommit, type LogItem } from './ack-log.js'
import { damagedSegment, listSegments, type JournalRound } from './journal.js'
import type { FoldRun } from './fold.js'
import { fileSize } from './run-files.js'
import type { RunState } from './run-state.js'

/** A journal segment not folded yet: what its fold will write, per run. */
export interface UnfoldedSegment {
  readonly segment: number
  readonly path: string
  readonly fold: Map<string, FoldRun>
  /** Its fold wrote and fsynced the run files (the catalog may take its runs; the segment goes next). */
  foldedToRuns?: boolean
}

/** The journal segment rounds are appended to. */
export interface Segment extends UnfoldedSegment {
  readonly handle: FileHandle
  bytes: number
  rounds: number
  readonly openedMs: number
}

/** A run's commit in a round being written: its items, the seq they go through, and where its log ends after it. */
export interface Committed {
  readonly run: RunState
  readonly throughSeq: number
  /** No longer in pendingEntries: appendAck never extends them. */
  readonly items: readonly LogItem[]
  readonly endBytes: number
}

/** The journal as read at start: its segments and, per run, what it holds. */
export interface JournalRead {
  readonly segments: Array<{ segment: number; path: string; rounds: JournalRound[]; validBytes: number; torn: boolean }>
  /** Bytes of commits each run has in the journal (and its log header, when announced there): its log may be no longer than where they end. */
  readonly journalEnd: Map<string, number>
  /** The first commit of each run in the journal: where the durable part of its log ends. */
  readonly firstAt: Map<string, { at: number; path: string }>
  readonly announced: Set<string>
  readonly lastRound: number
  readonly lastSegment: number
}

/**
 * Cuts a failed round off its segment, best effort: its bytes may have reached the disk whole, and a
 * restart would then bring back announcements refused to their writers (the newest run on a path
 * with none of its acks). The segment's size made durable at the end of the last good round removes
 * it; if that fails too, the disk is failing and the error already says the listener stopped.
 */
export async function voidRound(segment: Segment): Promise<void> {
  try {
    await segment.handle.truncate(segment.bytes)
    await segment.handle.sync()
  } catch {
    // the round may come back at restart: acks it holds were sent by their writers, so they are true
  }
}

/**
 * Commit n of the first queued items that fit in maxCommitBytes (at most maxItemsPerCommit; the first
 * always fits: an ack or steady is tens of bytes, an end's detail is cut to fit).
 */
export function framedCommit(n: number, pending: readonly LogItem[]): { items: LogItem[]; entry: Buffer } {
  let items = pending.slice(0, 1)
  let entry = frameCommit(n, items)
  for (let count = 2; count <= Math.min(pending.length, maxItemsPerCommit); count++) {
    const more = frameCommit(n, pending.slice(0, count))
    if (more.length > maxCommitBytes) break
    items = pending.slice(0, count)
    entry = more
  }
  if (entry.length > maxCommitBytes) throw new Error(`commit ${n} is ${entry.length} bytes, over the commit bound of ${maxCommitBytes}`)
  return { items, entry }
}

/** text cut to at most maxBytes of UTF-8, whole characters only, marked as cut with '…'. */
export function cutToBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text
  let kept = ''
  let bytes = Buffer.byteLength('…')
  for (const char of text) {
    bytes += Buffer.byteLength(char)
    if (bytes > maxBytes) break
    kept += char
  }
  return `${kept}…`
}

/** What folding a segment's rounds writes, per run (fold.ts). */
export function foldPlan(rounds: readonly JournalRound[]): FoldRun[] {
  const plan = new Map<string, FoldRun>()
  for (const round of rounds) {
    for (const { id, m } of round.a) plan.set(id, { runId: id, meta: m, at: logHeader(id).length, frames: [] })
    for (const { id, at, f } of round.c) {
      const run = plan.get(id)
      if (run === undefined) plan.set(id, { runId: id, at, frames: [f] })
      else run.frames.push(f)
    }
  }
  return [...plan.values()]
}

/** A segment cut back to its whole rounds, and made durable so. */
export async function cutTornTail(path: string, validBytes: number): Promise<void> {
  const handle = await open(path, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
  try {
    await handle.truncate(validBytes)
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Reads of a live directory tried at most (readWhileLive): a fold every 5 s meets a read rarely twice in a row. */
export const maxReadAttempts = 5

/** The journal's segments and their sizes, as one string (a change means a listener wrote to it). */
export async function journalState(journalDir: string): Promise<string> {
  const parts: string[] = []
  for (const { path } of await listSegments(journalDir).catch(() => [])) parts.push(`${path}:${await fileSize(path).catch(() => -1)}`)
  return parts.join(',')
}

/** A run's log may hold at most what the journal's commits of it end at (a fold cut short holds less). */
export async function checkLogWithinJournal(
  logPath: string,
  journalEndByte: number,
  journal: JournalRead,
  journalMoved: () => Promise<boolean>,
): Promise<void> {
  const sizeBytes = await fileSize(logPath)
  if (sizeBytes <= journalEndByte || (await journalMoved())) return
  const path = journal.segments.at(-1)?.path ?? 'the journal'
  throw damagedSegment(
    path,
    0,
    `the journal's commits of run ${logPath.split('/').at(-2)} end at byte ${journalEndByte} of its log, but ${logPath} holds ${sizeBytes} bytes: the journal is older than the log (a segment from an earlier state of the directory)`,
  )
}
