/**
 * The two candidate stores of store-choice.ts, holding the same runs the same way:
 *   lmdb     lmdb-js (loaded from a scratch directory: it is not a dependency of plugcheck), one entry
 *            per run (key: the run id, 8 bytes; value: a record), commits awaited until db.flushed
 *            (durable), default options otherwise (overlappingSync on Linux).
 *   journal  one append-only file of frames, [length u32 | xxh64 u64 of (length, body) | body], one
 *            write and one fdatasync per commit round.
 * A record body is [run id 8 | run index u32 | span count u32 | spans: toSeq, firstMs, lastMs as doubles].
 * In lmdb the value is [xxh64 u64 of (key, the rest) | run index | span count | spans]: the project's
 * rule (every stored record checksummed, checked on read) kept on top of lmdb, so damage to a value is
 * named either way and what is left to compare is damage to lmdb's own structure.
 * Every run's content follows from its index, so a reader knows exactly what it should find.
 */
import { closeSync, fdatasyncSync, openSync, readSync, fstatSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { xxh64 } from '../src/record/checksum.js'

export const spanBytes = 24
export const journalHeaderBytes = 12

/** The run id of run index i: 8 bytes that look random and sort in no useful order (as real ids). */
export function runIdOf(i: number): Buffer {
  const id = Buffer.alloc(8)
  id.writeBigUInt64BE((BigInt(i + 1) * 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn)
  return id
}

/** Run i's record body after its id: index, span count, spans (deterministic). */
export function recordRest(i: number, spans: number): Buffer {
  const rest = Buffer.alloc(8 + spans * spanBytes)
  rest.writeUInt32LE(i, 0)
  rest.writeUInt32LE(spans, 4)
  for (let k = 0; k < spans; k++) {
    const at = 8 + k * spanBytes
    rest.writeDoubleLE((k + 1) * 1000, at)
    rest.writeDoubleLE(1.7e12 + i * 1000 + k * 100, at + 8)
    rest.writeDoubleLE(1.7e12 + i * 1000 + k * 100 + 50, at + 16)
  }
  return rest
}

// ---- lmdb

// biome-ignore lint/suspicious/noExplicitAny: lmdb-js is loaded by path from a scratch install, without its types
export type LmdbDb = any

/** lmdb-js from a scratch install (`npm i --prefix DIR lmdb@3.5.6`). */
export function loadLmdb(scratchDir: string): { open: (options: object) => LmdbDb; version: { versionString: string } } {
  const require = createRequire(join(scratchDir, 'package.json'))
  return require('lmdb') as { open: (options: object) => LmdbDb; version: { versionString: string } }
}

export function openLmdb(scratchDir: string, dir: string): LmdbDb {
  return loadLmdb(scratchDir).open({ path: dir, encoding: 'binary', keyEncoding: 'binary', mapSize: 4 * 1024 ** 3 })
}

export function lmdbValue(key: Buffer, rest: Buffer): Buffer {
  const value = Buffer.alloc(8 + rest.length)
  rest.copy(value, 8)
  value.writeBigUInt64LE(xxh64(Buffer.concat([key, rest])), 0)
  return value
}

/** Checks one lmdb entry: its run index when the checksum holds, else null (damage named). */
export function checkLmdbEntry(key: Buffer, value: Buffer): number | null {
  if (value.length < 16) return null
  const rest = value.subarray(8)
  if (value.readBigUInt64LE(0) !== xxh64(Buffer.concat([key, rest]))) return null
  return rest.readUInt32LE(0)
}

/** Puts runs [from, to) with `spans` spans each, in transactions of 5,000, durably. */
export async function fillLmdb(db: LmdbDb, from: number, to: number, spans: number): Promise<void> {
  for (let start = from; start < to; start += 5000) {
    await db.transaction(() => {
      for (let i = start; i < Math.min(to, start + 5000); i++) {
        const key = runIdOf(i)
        db.put(key, lmdbValue(key, recordRest(i, spans)))
      }
    })
  }
  await db.flushed
}

// ---- journal

export function journalFrame(body: Buffer): Buffer {
  const frame = Buffer.alloc(journalHeaderBytes + body.length)
  frame.writeUInt32LE(body.length, 0)
  body.copy(frame, journalHeaderBytes)
  frame.writeBigUInt64LE(xxh64(Buffer.concat([frame.subarray(0, 4), body])), 4)
  return frame
}

/** Appends runs [from, to) as frames, 8 MiB a write, one fdatasync at the end. */
export function fillJournal(path: string, from: number, to: number, spans: number): void {
  const fd = openSync(path, 'a')
  try {
    let chunk: Buffer[] = []
    let bytes = 0
    for (let i = from; i < to; i++) {
      const frame = journalFrame(Buffer.concat([runIdOf(i), recordRest(i, spans)]))
      chunk.push(frame)
      bytes += frame.length
      if (bytes >= 8 << 20 || i === to - 1) {
        writeAll(fd, Buffer.concat(chunk))
        chunk = []
        bytes = 0
      }
    }
    fdatasyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

export function writeAll(fd: number, bytes: Buffer): void {
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at)
}

export interface JournalScan {
  /** Run index -> byte offset of its frame. */
  readonly index: Map<number, number>
  /** The first damage found ("bad checksum at byte N", ...), or null. */
  readonly damage: string | null
}

/** Reads the journal in 8 MiB chunks, checks every frame; stops at the first damage, naming its byte. */
export function scanJournal(path: string): JournalScan {
  const fd = openSync(path, 'r')
  const index = new Map<number, number>()
  try {
    const size = fstatSync(fd).size
    let buffer = Buffer.alloc(8 << 20)
    let bufferStart = 0
    let bufferEnd = 0
    let at = 0
    const ensure = (bytes: number): boolean => {
      if (at + bytes > size) return false
      if (at >= bufferStart && at + bytes <= bufferEnd) return true
      if (bytes > buffer.length) buffer = Buffer.alloc(bytes)
      bufferStart = at
      bufferEnd = at + readSync(fd, buffer, 0, Math.min(buffer.length, size - at), at)
      return at + bytes <= bufferEnd
    }
    while (at < size) {
      if (!ensure(journalHeaderBytes)) return { index, damage: `a frame header cut short at byte ${at}` }
      const length = buffer.readUInt32LE(at - bufferStart)
      if (length > 64 << 20 || !ensure(journalHeaderBytes + length))
        return { index, damage: `a frame length (${length}) past the end at byte ${at}` }
      const frame = buffer.subarray(at - bufferStart, at - bufferStart + journalHeaderBytes + length)
      const body = frame.subarray(journalHeaderBytes)
      if (frame.readBigUInt64LE(4) !== xxh64(Buffer.concat([frame.subarray(0, 4), body])))
        return { index, damage: `a frame's checksum does not match at byte ${at}` }
      index.set(body.readUInt32LE(8), at)
      at += journalHeaderBytes + length
    }
    return { index, damage: null }
  } finally {
    closeSync(fd)
  }
}
