/**
 * Reads a file's chunks in order with the next reads already in flight on libuv's thread pool, so
 * the caller checks one chunk while the disk (and the kernel's copy out of the page cache) works on
 * the following ones: verify's reading and checking overlap instead of taking turns.
 *
 * Memory is fixed: the caller's buffers, reused in turn. With B buffers and readsInFlight reads
 * pending, the caller may hold the last B - readsInFlight chunks handed out (a chunk stays valid
 * until the caller has asked for that many more): verify keeps chunks while other threads check
 * them. Every read started is awaited before the generator ends, even when the caller stops early or
 * a read fails, so the caller may close the fd afterwards.
 *
 * A read the storage refuses for the data itself (isUnreadable: EIO, EBADMSG, ...) is not an error
 * here: the chunk is handed out with `unreadable` set and its bytes unfilled, for the caller to read
 * again in smaller pieces (verify judges a record the storage cannot return as lost). Any other read
 * error stops the reading with a one-line runtime error.
 */
import { read } from 'node:fs'
import { assert } from '../../base/assert.js'
import { describeSystemError, runtimeError, systemErrorCode } from '../../base/errors.js'

export interface ChunkRequest {
  readonly offsetBytes: number
  readonly lengthBytes: number
}

export interface Chunk<R extends ChunkRequest> {
  readonly request: R
  /** The bytes read: request.lengthBytes long, shorter only at the end of the file; unfilled when unreadable is set. */
  readonly bytes: Buffer
  /** The read failed with an error of the data itself (isUnreadable): its error and where. */
  readonly unreadable?: { readonly error: unknown; readonly atBytes: number }
}

/**
 * Errors with which storage says it cannot return the data asked for, while the file and the device
 * are still there: EIO (a failed sector, btrfs's failed data checksum), EBADMSG (ext4's failed
 * checksum), EUCLEAN (a corrupted file system structure), ENODATA (a media error on some drivers).
 */
const unreadableCodes: ReadonlySet<string> = new Set(['EIO', 'EBADMSG', 'EUCLEAN', 'ENODATA'])

export function isUnreadable(error: unknown): boolean {
  const code = systemErrorCode(error)
  return code !== undefined && unreadableCodes.has(code)
}

type Settled = { readonly got: number } | { readonly error: unknown; readonly atBytes: number }

/** Reads up to `wanted` bytes at offset, short only at the end of the file; never rejects. */
function readFullyAsync(fd: number, buffer: Buffer, wanted: number, offset: number): Promise<Settled> {
  return new Promise((resolve) => {
    let done = 0
    const step = (): void => {
      read(fd, buffer, done, wanted - done, offset + done, (error, n) => {
        if (error !== null) return resolve({ error, atBytes: offset + done })
        done += n
        if (n === 0 || done >= wanted) resolve({ got: done })
        else step()
      })
    }
    step()
  })
}

export async function* readAhead<R extends ChunkRequest>(
  fd: number,
  path: string,
  requests: Iterable<R>,
  buffers: readonly Buffer[],
  readsInFlight: number,
): AsyncGenerator<Chunk<R>> {
  assert(buffers.length > readsInFlight, () => `${buffers.length} buffers leave none for the caller with ${readsInFlight} reads in flight`)
  const pending: { request: R; buffer: Buffer; settled: Promise<Settled> }[] = []
  const iterator = requests[Symbol.iterator]()
  let started = 0
  const startNext = (): void => {
    const next = iterator.next()
    if (next.done === true) return
    // With readsInFlight reads pending and the caller holding the rest, this buffer is free.
    const buffer = buffers[started++ % buffers.length]!
    assert(
      next.value.lengthBytes <= buffer.length,
      () => `a chunk of ${next.value.lengthBytes} bytes does not fit a ${buffer.length}-byte buffer`,
    )
    pending.push({ request: next.value, buffer, settled: readFullyAsync(fd, buffer, next.value.lengthBytes, next.value.offsetBytes) })
  }
  try {
    for (let i = 0; i < readsInFlight; i++) startNext()
    while (pending.length > 0) {
      const head = pending.shift()!
      const settled = await head.settled
      if ('error' in settled && !isUnreadable(settled.error))
        throw runtimeError(`could not read ${path} at offset ${settled.atBytes}: ${describeSystemError(settled.error)}`)
      startNext()
      if ('error' in settled) yield { request: head.request, bytes: head.buffer.subarray(0, head.request.lengthBytes), unreadable: settled }
      else yield { request: head.request, bytes: head.buffer.subarray(0, settled.got) }
    }
  } finally {
    await Promise.all(pending.map((p) => p.settled))
  }
}
