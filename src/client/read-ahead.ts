/**
 * Reads a file's chunks in order with the next reads already in flight on libuv's thread pool, so
 * the caller checks one chunk while the disk (and the kernel's copy out of the page cache) works on
 * the following ones: verify's reading and checking overlap instead of taking turns.
 *
 * Memory is fixed: readsInFlight + 1 buffers of bufferBytes, reused (the chunk handed out stays
 * valid until the caller asks for the next one). Every read started is awaited before the generator
 * ends, even when the caller stops early or a read fails, so the caller may close the fd afterwards.
 */
import { read } from 'node:fs'
import { describeSystemError, runtimeError } from '../errors.js'

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
  bufferBytes: number,
  readsInFlight: number,
): AsyncGenerator<Chunk<R>> {
  const buffers = Array.from({ length: readsInFlight + 1 }, () => Buffer.alloc(bufferBytes))
  const pending: { request: R; buffer: Buffer; settled: Promise<Settled> }[] = []
  const iterator = requests[Symbol.iterator]()
  let started = 0
  const startNext = (): void => {
    const next = iterator.next()
    if (next.done === true) return
    if (next.value.lengthBytes > bufferBytes) throw new Error(`a chunk of ${next.value.lengthBytes} bytes does not fit a ${bufferBytes}-byte buffer`)
    // With readsInFlight reads pending and one chunk held by the caller, this buffer is free.
    const buffer = buffers[started++ % buffers.length]!
    pending.push({ request: next.value, buffer, settled: readFullyAsync(fd, buffer, next.value.lengthBytes, next.value.offsetBytes) })
  }
  try {
    for (let i = 0; i < readsInFlight; i++) startNext()
    while (pending.length > 0) {
      const head = pending.shift()!
      const settled = await head.settled
      if ('error' in settled) throw runtimeError(`could not read ${path} at offset ${settled.atBytes}: ${describeSystemError(settled.error)}`)
      startNext()
      yield { request: head.request, bytes: head.buffer.subarray(0, settled.got) }
    }
  } finally {
    await Promise.all(pending.map((p) => p.settled))
  }
}
