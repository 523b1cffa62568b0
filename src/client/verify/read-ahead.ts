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
 */
import { read } from 'node:fs'
import { assert } from '../../base/assert.js'
import { describeSystemError, runtimeError } from '../../base/errors.js'

export interface ChunkRequest {
  readonly offsetBytes: number
  readonly lengthBytes: number
}

export interface Chunk<R extends ChunkRequest> {
  readonly request: R
  /** The bytes read: request.lengthBytes long, shorter only at the end of the file. */
  readonly bytes: Buffer
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
      if ('error' in settled)
        throw runtimeError(`could not read ${path} at offset ${settled.atBytes}: ${describeSystemError(settled.error)}`)
      startNext()
      yield { request: head.request, bytes: head.buffer.subarray(0, settled.got) }
    }
  } finally {
    await Promise.all(pending.map((p) => p.settled))
  }
}
