/**
 * The store's reading of a directory (ack-store.ts opens it): the catalog at start, each run's files
 * replayed (meta.msgpack, acks.log, verdict.msgpack) and the journal's segments applied in memory,
 * by the rules of ack-store.ts's header. Any damage is a refusal naming the file, never fewer acks.
 */
import { join } from 'node:path'
import type { z } from 'zod'
import type { StoredVerdict } from '../protocol/messages.js'
import { verdictDisagreement } from '../protocol/verdict-rules.js'
import { logHeader, parseCommitFrame } from './ack-log.js'
import { replayLog } from './ack-log-reader.js'
import { damagedSegment, listSegments, readSegment, type JournalRound } from './journal.js'
import { logShorterThanJournal } from './fold.js'
import { catalogName, readCatalog, type Catalog, type CatalogEntry } from './catalog.js'
import { lessThanRecorded, runDirGone } from './catalog-check.js'
import type { JournalRead } from './journal-rounds.js'
import {
  damagedLog,
  damagedMeta,
  describeInvalid,
  fileSize,
  itemsInLog,
  logStamp,
  logWithoutHeader,
  maxMetaFileBytes,
  maxVerdictFileBytes,
  metaFileSchema,
  originOf,
  readBounded,
  tornTailWarning,
  unsealed,
  verdictFileSchema,
} from './run-files.js'
import { type RunOrigin, type RunState, applyItem, newRunState, noSpans, setLogged } from './run-state.js'
import { StoreState } from './store-state.js'

/** The store reading a directory: catalog, run files and journal, by the rules of a start. */
export abstract class StoreReplay extends StoreState {
  /** The catalog, or undefined (with a warning when it should have been usable) for a full replay. */
  protected async readCatalogAtStart(catalogUse: 'use' | 'peek' | 'check', runDirs: number): Promise<Catalog | undefined> {
    const catalog = await readCatalog(this.dir)
    const path = join(this.dir, catalogName)
    if (catalog === 'missing') {
      // An older listener's directory has none; a run directory without it is replayed, nothing lost.
      if (catalogUse === 'use' && runDirs > 0)
        this.warnings.push(`${path} is missing: every run's log is replayed (this start takes longer), and a new catalog is written`)
      return undefined
    }
    if ('problem' in catalog) {
      this.warnings.push(
        `${path} is not usable (${catalog.problem}): every run's log is replayed (this start takes longer)${catalogUse === 'use' ? ', and a new catalog is written' : ''}`,
      )
      return undefined
    }
    return catalog
  }

  /** A run from its catalog entry: its summary only (spans and writer read back for a query, like an evicted run's). */
  protected restore(entry: CatalogEntry): RunState {
    const origin: RunOrigin = {
      ...(entry.peer === undefined ? {} : { peer: entry.peer }),
      ...(entry.writer === undefined ? {} : { writer: entry.writer }),
      ...(entry.authenticated === undefined ? {} : { authenticated: entry.authenticated }),
      ...(entry.campaign === undefined ? {} : { campaign: entry.campaign }),
    }
    const run = newRunState(entry.meta, entry.announcedMs, entry.announceIndex, origin, noSpans)
    run.retired = true
    setLogged(run, entry)
    run.metaBytes = entry.metaBytes
    run.verdict = entry.verdict
    if (entry.verdictBytes !== undefined) run.verdictBytes = entry.verdictBytes
    run.evicted = { spanCount: entry.spanCount, lastAckMs: entry.lastAckMs }
    run.writerTrimmed = entry.writer !== undefined
    run.catalogued = true
    run.fromCatalog = true
    this.runs.set(entry.id, run)
    this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, entry.announceIndex ?? 0)
    return run
  }

  /** A run replayed from its files against what the catalog recorded of it: fewer commits, bytes or acks is damage. */
  protected checkAgainstCatalog(runId: string, entry: CatalogEntry): void {
    const run = this.runs.get(runId)
    if (run === undefined) throw runDirGone(this.runDir(runId), entry)
    const problem = lessThanRecorded(run, entry)
    if (problem !== undefined) throw damagedLog(join(this.runDir(runId), 'acks.log'), problem)
  }

  /**
   * Every segment, oldest first; only the last one's last round may be torn (ignored with a warning).
   * The segments must be numbered one after the other and chain up by their rounds (journal.ts): a
   * segment missing, or one from another state of the directory put back, is damage.
   */
  protected async readJournal(): Promise<JournalRead> {
    const listed = await listSegments(join(this.dir, 'journal'))
    const segments: JournalRead['segments'] = []
    const firstAt: JournalRead['firstAt'] = new Map()
    const journalEnd: JournalRead['journalEnd'] = new Map()
    const announced = new Set<string>()
    let nextRound = 0
    for (const [i, { segment, path }] of listed.entries()) {
      const previous = listed[i - 1]
      if (previous !== undefined && segment !== previous.segment + 1) {
        throw damagedSegment(
          path,
          0,
          `the segment before it is ${previous.path}: segments ${previous.segment + 1} to ${segment - 1} are missing`,
        )
      }
      const read = await readSegment(path, segment, i === listed.length - 1, nextRound)
      if (read.tornTail !== null) {
        this.warnings.push(
          `ignored ${read.tornTail.bytes} bytes of a torn journal round at byte ${read.tornTail.atByte} of ${path}: the last round, cut short by a crash, was never reported as recorded`,
        )
      }
      nextRound = read.rounds.length === 0 ? read.firstRound : read.rounds.at(-1)!.r + 1
      for (const round of read.rounds) {
        for (const a of round.a) {
          announced.add(a.id)
          journalEnd.set(a.id, logHeader(a.id).length)
        }
        for (const c of round.c) {
          if (!firstAt.has(c.id) && !announced.has(c.id)) firstAt.set(c.id, { at: c.at, path })
          journalEnd.set(c.id, c.at + c.f.length)
        }
      }
      segments.push({ segment, path, rounds: read.rounds, validBytes: read.validBytes, torn: read.tornTail !== null })
    }
    return {
      segments,
      firstAt,
      journalEnd,
      announced,
      lastRound: nextRound === 0 ? 0 : nextRound - 1,
      lastSegment: listed.at(-1)?.segment ?? 0,
    }
  }

  /** One journal round applied in memory: its announcements, then its commits (checked as a log's). */
  protected applyRound(round: JournalRound, path: string): void {
    for (const { id, m } of round.a) {
      if (this.runs.has(id)) throw damagedSegment(path, 0, `round ${round.r} announces run ${id} a second time`)
      const metaFile = this.metaOf(m, `${path} (round ${round.r})`, id)
      const run = newRunState(metaFile.meta, metaFile.announcedMs, metaFile.announceIndex, originOf(metaFile))
      run.retired = true
      run.logBytes = logHeader(id).length
      run.appliedBytes = run.logBytes
      run.metaBytes = m.length
      this.runs.set(id, run)
      this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, metaFile.announceIndex ?? 0)
    }
    for (const { id, at, f } of round.c) {
      const run = this.runs.get(id)
      const where = `round ${round.r} holds a commit of run ${id}`
      if (run === undefined) throw damagedSegment(path, 0, `${where}, which is not on record (its directory in runs/ is gone)`)
      const commit = parseCommitFrame(f)
      if ('problem' in commit) throw damagedSegment(path, 0, `${where} that ${commit.problem}`)
      if (commit.n !== run.commits + 1 || at !== run.logBytes)
        throw damagedSegment(
          path,
          0,
          `${where} numbered ${commit.n} for byte ${at}, where commit ${run.commits + 1} at byte ${run.logBytes} was expected`,
        )
      for (const item of commit.items) {
        const problem = applyItem(run, item, this.maxSpans)
        if (problem !== undefined) throw damagedSegment(path, 0, `${where} that ${problem}`)
      }
      run.commits = commit.n
      run.logBytes += f.length
      run.appliedBytes = run.logBytes
      run.durableThroughSeq = run.lastAckedSeq
    }
  }

  /** meta.msgpack's bytes checked (checksum, schema, run id), or a refusal naming where they were read. */
  protected metaOf(bytes: Buffer, where: string, runId: string): z.infer<typeof metaFileSchema> {
    const decoded = unsealed('meta', bytes)
    if ('problem' in decoded) throw damagedMeta(where, decoded.problem)
    const parsed = metaFileSchema.safeParse(decoded.value)
    if (!parsed.success) throw damagedMeta(where, describeInvalid(parsed.error))
    if (parsed.data.meta.runId !== runId)
      throw damagedMeta(where, `it describes run ${parsed.data.meta.runId}, not run ${runId} of its directory`)
    return parsed.data
  }

  /**
   * A run directory is one of: a run (meta.msgpack readable and valid), an announcement that never
   * completed (no meta.msgpack and an empty or missing acks.log: skipped with a warning), or damage
   * (meta.msgpack there but unreadable, not a regular file or invalid; or missing while acks.log holds
   * acks; or sealed while acks.log lacks the header written before it): a refusal naming the file.
   * Judging the rest of a group, or an older run of the path, without this one could turn a FAIL into a PASS.
   */
  protected async replay(runId: string, journaled?: { at: number; path: string }, chunkBytes?: number): Promise<void> {
    const metaPath = join(this.runDir(runId), 'meta.msgpack')
    const logPath = join(this.runDir(runId), 'acks.log')
    const metaBytes = await readBounded(metaPath, maxMetaFileBytes)
    if (metaBytes === 'not-a-directory') {
      this.warnings.push(`run ${runId}: ${this.runDir(runId)} is not a directory, skipped`)
      return
    }
    if (metaBytes === 'missing') {
      const { items, totalBytes } = await itemsInLog(logPath, runId)
      if (items === 0) {
        // Created first (empty, or its header alone), meta.msgpack last: the listener died in between,
        // before the writer was told to start.
        this.warnings.push(`run ${runId}: no metadata and an empty ack log (its announcement never completed), skipped`)
        return
      }
      throw damagedMeta(metaPath, `it is missing, but ${logPath} holds ${totalBytes} bytes of acks`)
    }
    if (metaBytes === 'not-a-file') throw damagedMeta(metaPath, 'not a regular file')
    if (metaBytes === 'too-large') throw damagedMeta(metaPath, `it is over ${maxMetaFileBytes} bytes, more than any run's metadata`)
    const decoded = unsealed('meta', metaBytes)
    if ('problem' in decoded) throw damagedMeta(metaPath, decoded.problem)
    const parsed = metaFileSchema.safeParse(decoded.value)
    if (!parsed.success) throw damagedMeta(metaPath, describeInvalid(parsed.error))
    const metaFile = parsed.data
    if (metaFile.meta.runId !== runId)
      throw damagedMeta(metaPath, `it describes run ${metaFile.meta.runId}, not run ${runId} of its directory`)
    const run = newRunState(metaFile.meta, metaFile.announcedMs, metaFile.announceIndex, originOf(metaFile))
    run.retired = true
    run.metaSealed = decoded.sealed
    // With commits in the journal, only the log's first `at` bytes are durable (fold.ts): the rest is
    // not read (a fold cut short), and a log shorter than that lost fsynced bytes.
    if (journaled !== undefined) {
      const sizeBytes = await fileSize(logPath)
      if (sizeBytes < journaled.at) throw logShorterThanJournal(logPath, sizeBytes, journaled.at)
    }
    // Taken before the read: a change during it shows as another stamp at the next query.
    const stamp = await logStamp(logPath)
    const replayed = await replayLog(logPath, runId, (item) => applyItem(run, item, this.maxSpans), journaled?.at, chunkBytes)
    // A sealed meta.msgpack was written by this version, after the log's header was fsynced: no crash
    // leaves it without that header. (Older listeners created an empty log: a legacy run may have one.)
    if (decoded.sealed && replayed.format !== 2) throw damagedLog(logPath, logWithoutHeader(replayed))
    if (journaled !== undefined && (replayed.tornTail !== null || replayed.validBytes !== journaled.at)) {
      throw damagedLog(
        logPath,
        `its first ${journaled.at} bytes, fsynced before ${journaled.path} was written, do not end in a whole commit (whole entries end at byte ${replayed.validBytes})`,
      )
    }
    if (replayed.tornTail !== null) this.warnings.push(tornTailWarning(runId, logPath, replayed.tornTail))
    run.commits = replayed.commits
    run.logBytes = replayed.validBytes
    run.appliedBytes = run.logBytes
    run.metaBytes = metaBytes.length
    run.durableThroughSeq = run.lastAckedSeq
    if (stamp !== undefined) run.logSeen = stamp
    this.runs.set(runId, run)
    this.lastAnnounceIndex = Math.max(this.lastAnnounceIndex, metaFile.announceIndex ?? 0)
  }

  /**
   * The run's verdict.msgpack, if there is one and it checks out. A damaged one (unreadable, invalid,
   * another run's) is reported as a warning naming the file, never dropped in silence; the run then
   * shows no verdict until a verifier reports one again. A sealed one that counted more acks than the
   * log holds proves the log lost recorded acks: a refusal naming the log.
   */
  protected async replayVerdict(run: RunState): Promise<StoredVerdict | null> {
    const runId = run.meta.runId
    const path = join(this.runDir(runId), 'verdict.msgpack')
    let bytes: Awaited<ReturnType<typeof readBounded>>
    try {
      bytes = await readBounded(path, maxVerdictFileBytes)
    } catch (error) {
      this.warnings.push(`run ${runId}: ${(error as Error).message}; the run's verdict is not shown (verify it again to store a new one)`)
      return null
    }
    if (bytes === 'missing') return null
    // A damaged verdict file still takes its bytes on disk.
    if (typeof bytes !== 'string') run.verdictBytes = bytes.length
    let problem: string
    if (bytes === 'not-a-directory' || bytes === 'not-a-file') problem = 'not a regular file'
    else if (bytes === 'too-large') problem = `it is over ${maxVerdictFileBytes} bytes, more than any verdict`
    else {
      const decoded = unsealed('verdict', bytes)
      const parsed = verdictFileSchema.safeParse('value' in decoded ? decoded.value : undefined)
      if ('problem' in decoded) problem = decoded.problem
      else if (!parsed.success) problem = describeInvalid(parsed.error).replace("a run's metadata", 'a verdict')
      else if (parsed.data.runId !== runId) problem = `it is the verdict of run ${parsed.data.runId}, not of run ${runId}`
      else if (decoded.sealed && parsed.data.result.acked > run.lastAckedSeq) {
        // Its checksum vouches for it: the acks it counted were in the log when it was judged, so the
        // log lost them since (a torn tail here is not the commit a crash cut short).
        throw damagedLog(
          join(this.runDir(runId), 'acks.log'),
          `it holds ${run.lastAckedSeq} acknowledged records, but the run's verdict stored after them (${path}, checksummed) counted ${parsed.data.result.acked}: recorded acks are missing from the log`,
        )
      } else {
        // A replayed run takes no more acks, and a verdict was stored only once its acks were final.
        const disagreement = verdictDisagreement(parsed.data.result, run.meta.method, run.lastAckedSeq, true)
        if (disagreement === undefined) return parsed.data.result
        problem = `the verdict ${disagreement}`
      }
    }
    this.warnings.push(`run ${runId}: ${path} is damaged (${problem}); the run's verdict is not shown (verify it again to store a new one)`)
    return null
  }
}
