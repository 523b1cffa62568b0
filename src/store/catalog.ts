/**
 * <dir>/catalog.msgpack: every run that is retired and wholly in runs/, as a summary (what the store
 * keeps in memory for such a run), so that a listener starts without replaying every run's log.
 *
 *   sealed-file.ts framing, kind 'catalog' (magic, xxh64 of the body), body: a sequence of msgpack values
 *   header   { k: 'catalog', version: 2, lastAnnounceIndex, runs }     runs: how many entries follow;
 *            lastAnnounceIndex: the highest of its entries' (0 when none has one; a catalog of an
 *            earlier version may say more: refused once, a full replay, and written again)
 *   slices   arrays of up to entriesPerSlice entries, each packed with msgpackr records (an entry's keys
 *            written once per slice, not once per entry: half the bytes, ~2x faster to decode; each
 *            slice defines its own records, so it decodes alone). Version 1 (before records): the
 *            entries follow the header one by one, as maps; still read, then written again as 2.
 *   entry    { id, meta, announcedMs, announceIndex?, peer?, writer?, authenticated?, campaign?, end?,
 *              steadyMs, lastAckedSeq, lastAckMs?, spanCount?, commits, logBytes, metaBytes, verdict,
 *              verdictBytes? }   writer without its fingerprint ({ bootId, fingerprint: null })
 *
 * The per-run files are the authority; the catalog is derived data. It is written (temp file, fsync,
 * rename, directory fsync) after a fold and before the fold's segment is deleted, so a run folded
 * is in the catalog, or still in the journal (replayed the old way), or was live when the catalog was
 * written (replayed the old way). A catalog missing, unreadable or damaged: a warning and a full
 * replay. What the catalog says of a run is checked against its files after start (the store's scrub).
 */
import { constants as fsConstants } from 'node:fs'
import { open, readFile, rename, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { Packr } from 'msgpackr'
import { z } from 'zod'
import { runMetaSchema } from '../record/format.js'
import {
  campaignTagSchema,
  endReasons,
  epochMsSchema,
  maxPlausibleSeq,
  storedVerdictSchema,
  writerEnvSchema,
} from '../protocol/messages.js'
import { syncDirectoryAsync } from '../base/directory-sync.js'
import { describeSystemError } from '../base/errors.js'
import { seal, unseal } from './sealed-file.js'

export const catalogFormatVersion = 2
/** Format versions this listener reads (1: entries as maps, one after the other). */
const readableVersions = new Set([1, 2])
export const catalogName = 'catalog.msgpack'
/** Entries encoded between two yields to the event loop while the catalog is built. */
const entriesPerSlice = 2_000
/** A catalog of 100,000 runs is ~30 MiB; one larger than this is not one this listener wrote. */
const maxCatalogBytes = 1024 * 1024 * 1024
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })
const recordsOptions = { useRecords: true, int64AsType: 'number', mapsAsObjects: true } as const
const slicePackr = new Packr(recordsOptions)

const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)
const headerSchema = z.object({ k: z.literal('catalog'), version: z.number().int().nonnegative(), lastAnnounceIndex: count, runs: count })
export const catalogEntrySchema = z.object({
  id: z.string().regex(/^[0-9a-f]{16}$/),
  meta: runMetaSchema,
  announcedMs: epochMsSchema,
  announceIndex: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
  peer: z.string().max(64).optional(),
  writer: writerEnvSchema.optional(),
  authenticated: z.boolean().optional(),
  campaign: campaignTagSchema.optional(),
  end: z.object({ reason: z.enum([...endReasons, 'vanished']), detail: z.string().max(4096).optional(), atMs: epochMsSchema }).optional(),
  steadyMs: epochMsSchema.nullable(),
  lastAckedSeq: count,
  lastAckMs: epochMsSchema.optional(),
  /** Spans its log replays to (absent for a run ended in a listener's life: its spans were live ones). */
  spanCount: count.optional(),
  commits: count,
  logBytes: count,
  metaBytes: count,
  verdict: storedVerdictSchema.nullable(),
  verdictBytes: count.optional(),
})
export type CatalogEntry = z.infer<typeof catalogEntrySchema>

export interface Catalog {
  /** Its format: one older than catalogFormatVersion is written again at the next chance. */
  readonly version: number
  readonly lastAnnounceIndex: number
  readonly entries: CatalogEntry[]
}

/**
 * The catalog's bytes, encoded a slice of entries at a time (yielding between slices: 100,000 runs never
 * hold the event loop in one go). lastAnnounceIndex: the highest its runs hold (readCatalog refuses
 * more; runs announced later are replayed at start, and their indexes counted then).
 */
export async function encodeCatalog<T>(lastAnnounceIndex: number, runs: readonly T[], entryOf: (run: T) => CatalogEntry): Promise<Buffer> {
  const parts: Buffer[] = [packr.pack({ k: 'catalog', version: catalogFormatVersion, lastAnnounceIndex, runs: runs.length })]
  for (let i = 0; i < runs.length; i += entriesPerSlice) {
    parts.push(slicePackr.pack(runs.slice(i, i + entriesPerSlice).map(entryOf)))
    if (i + entriesPerSlice < runs.length) await yieldToLoop()
  }
  return seal('catalog', Buffer.concat(parts))
}

/** The catalog read back and checked (checksum, schema of every entry), 'missing', or what is wrong with it. */
export async function readCatalog(dir: string): Promise<Catalog | 'missing' | { readonly problem: string }> {
  const path = join(dir, catalogName)
  let bytes: Buffer
  try {
    const stats = await stat(path)
    if (!stats.isFile()) return { problem: 'it is not a regular file' }
    if (stats.size > maxCatalogBytes) return { problem: `it is ${stats.size} bytes, more than any catalog` }
    bytes = await readFile(path, { flag: fsConstants.O_RDONLY | fsConstants.O_NONBLOCK })
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return 'missing'
    return { problem: describeSystemError(error) }
  }
  const file = unseal('catalog', bytes)
  if (file.kind === 'damaged') return { problem: `${file.problem} (damaged)` }
  if (file.kind === 'legacy') return { problem: 'it does not start with a catalog header (damaged)' }
  let values: unknown[]
  try {
    // A decoder of its own: records defined by an earlier file must not shape this one.
    values = new Packr(recordsOptions).unpackMultiple(file.body) as unknown[]
  } catch {
    return { problem: 'its body is not valid msgpack (damaged)' }
  }
  const header = headerSchema.safeParse(values[0])
  if (!header.success) return { problem: 'its header is not valid' }
  if (!readableVersions.has(header.data.version)) return { problem: `it is of format ${header.data.version}, not ${catalogFormatVersion}` }
  if (header.data.version > 1 && !values.slice(1).every((slice) => Array.isArray(slice)))
    return { problem: 'it holds something else than slices of entries' }
  const decoded = header.data.version === 1 ? values.slice(1) : (values.slice(1) as unknown[][]).flat()
  if (decoded.length !== header.data.runs) return { problem: `its header says ${header.data.runs} runs, but it holds ${decoded.length}` }
  const entries: CatalogEntry[] = []
  const ids = new Set<string>()
  const announceIndexes = new Set<number>()
  for (let i = 1; i <= decoded.length; i++) {
    const entry = catalogEntrySchema.safeParse(decoded[i - 1])
    if (!entry.success) return { problem: `its entry ${i} is not valid` }
    const impossible = entryRules.find(([, holds]) => !holds(entry.data, header.data.lastAnnounceIndex))
    if (impossible !== undefined) return { problem: `its entry ${i} (run ${entry.data.id}) ${impossible[0]}` }
    if (ids.has(entry.data.id)) return { problem: `its entry ${i} holds run ${entry.data.id} a second time` }
    const announceIndex = entry.data.announceIndex
    if (announceIndex !== undefined && announceIndexes.has(announceIndex))
      return { problem: `its entry ${i} (run ${entry.data.id}) has announcement index ${announceIndex}, as an earlier run has` }
    ids.add(entry.data.id)
    if (announceIndex !== undefined) announceIndexes.add(announceIndex)
    entries.push(entry.data)
  }
  // A listener writes the highest index its entries hold (encodeCatalog's caller): one past it is not
  // its own, and taken as the counter it could give the next runs indexes their meta.msgpack refuses.
  let highest = 0
  for (const index of announceIndexes) highest = Math.max(highest, index)
  if (header.data.lastAnnounceIndex > highest)
    return {
      problem: `its header says the last announcement was number ${header.data.lastAnnounceIndex}, past its entries' highest (${highest})`,
    }
  return { version: header.data.version, lastAnnounceIndex: header.data.lastAnnounceIndex, entries }
}

/** A file larger than this is not one a listener wrote (1 PiB); a byte count past it is made up. */
const maxFileBytes = 2 ** 50

/**
 * What every entry this listener writes holds, beyond its schema: its checksum vouches for the bytes,
 * not for who made them, and an entry that breaks one of these was not written from run files (it
 * could show fewer acks, or bytes that fill every quota, until the background check). Broken: the
 * whole catalog is refused (a warning and a full replay from the run files, the authority).
 */
const entryRules: ReadonlyArray<readonly [string, (entry: CatalogEntry, lastAnnounceIndex: number) => boolean]> = [
  ['describes another run in its metadata', (e) => e.meta.runId === e.id],
  // Replay holds every ack to this (by the time it was received), and the last one is the highest.
  [
    'has acks past what a writer can write by its last ack',
    (e) => e.lastAckedSeq === 0 || (e.lastAckMs !== undefined && e.lastAckedSeq <= maxPlausibleSeq(e.announcedMs, e.lastAckMs)),
  ],
  // Each commit holds at least one item: acks (one seq or more), the run's steady, its end (a log of an
  // older listener holds no commit at all: its entries stand alone).
  ['has more commits than its acks, steady and end make', (e) => e.commits <= e.lastAckedSeq + 2],
  ['has more commits than bytes of log', (e) => e.commits <= e.logBytes],
  ['has more spans than acks', (e) => (e.spanCount ?? 0) <= e.lastAckedSeq],
  [
    'has a file size no listener writes',
    (e) => e.logBytes <= maxFileBytes && e.metaBytes > 0 && e.metaBytes <= maxFileBytes && (e.verdictBytes ?? 0) <= maxFileBytes,
  ],
  ['has a verdict but no verdict file', (e) => e.verdict === null || (e.verdictBytes ?? 0) > 0],
  ['has a verdict that counted more acks than the run has', (e) => e.verdict === null || e.verdict.acked <= e.lastAckedSeq],
  ['was announced after the last announcement on record', (e, lastAnnounceIndex) => (e.announceIndex ?? 0) <= lastAnnounceIndex],
]

/** The catalog written whole: temp file, fsync, rename, directory fsync (a crash leaves the old one or the new one). */
export async function writeCatalog(dir: string, bytes: Buffer): Promise<void> {
  const tmpPath = join(dir, `${catalogName}.tmp`)
  const file = await open(tmpPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, 0o644)
  try {
    const { bytesWritten } = await file.write(bytes, 0, bytes.length, 0)
    if (bytesWritten !== bytes.length)
      throw Object.assign(new Error(`short write to ${tmpPath}: ${bytesWritten} of ${bytes.length} bytes (disk full?)`), { code: 'ENOSPC' })
    await file.sync()
  } finally {
    await file.close().catch(() => undefined)
  }
  await rename(tmpPath, join(dir, catalogName))
  await syncDirectoryAsync(dir)
}
