/**
 * Verify's whole-record check (record/scan.ts) on worker threads: the main thread reads chunks into
 * shared buffers (client/verify/read-ahead.ts) and hands each to a thread (scan-worker.ts) by reference, no
 * copy; the thread answers with one seq per slot (0 where the record is not provably whole). The main
 * thread judges the chunks in file order with those answers and runs the slow classifier itself on
 * the slots no thread accepted, so the verdict logic (judge.ts) stays single-threaded.
 *
 * Fault model: a thread that cannot start, throws, or exits while verify runs fails every pending
 * and later check with a runtime error (exit 3). verify then stops: no chunk is ever judged without
 * its answer, so a failed thread cannot yield a partial verdict.
 */
import { availableParallelism } from 'node:os'
import type { Worker } from 'node:worker_threads'
import { runtimeError } from '../../base/errors.js'
import type { Pattern } from '../../record/patterns.js'
import type { WholeRecordCheck } from '../../record/scan.js'
import { startModuleWorker } from '../../base/module-worker.js'

/** Overrides the thread count (0: check on the main thread), whatever the file's size; for tests and benchmarks. */
export const threadsEnv = 'PLUGCHECK_VERIFY_THREADS'
/** More threads than this would wait on the disk: one checks ~0.7 GB/s. */
const maxThreads = 4

export interface ScanThreadData {
  readonly runId: string
  readonly recordSizeBytes: number
  readonly pattern: Pattern
  readonly slotCount: number
}

export interface ScanRequest {
  readonly id: number
  readonly buffer: SharedArrayBuffer
  readonly byteOffset: number
  readonly lengthBytes: number
  readonly firstSlot: number
  readonly slots: number
}

export interface ScanReply {
  readonly id: number
  readonly seqs: Float64Array<ArrayBuffer>
}

/** Checks chunks: per slot, the seq of the whole record of ours it holds, or 0 (WholeRecordCheck.seqsOf). */
export interface ChunkChecker {
  readonly threads: number
  /** chunk must stay unchanged until the promise settles. */
  check(chunk: Buffer, firstSlot: number, slots: number): Promise<Float64Array>
  close(): Promise<void>
}

/** Threads for a verify reading fileBytes in chunks of chunkBytes: none for a single chunk (nothing to overlap), else one per core. */
export function scanThreadCount(fileBytes: number, chunkBytes: number): number {
  const override = process.env[threadsEnv]
  if (override !== undefined && /^\d+$/.test(override)) return Math.min(Number(override), maxThreads)
  const cores = availableParallelism()
  return fileBytes > chunkBytes && cores > 1 ? Math.min(cores, maxThreads) : 0
}

/** The read buffers: shared memory when threads check them. */
export function chunkBuffers(count: number, bytes: number, shared: boolean): Buffer[] {
  return Array.from({ length: count }, () => (shared ? Buffer.from(new SharedArrayBuffer(bytes)) : Buffer.alloc(bytes)))
}

export function inThreadChecker(whole: WholeRecordCheck): ChunkChecker {
  return {
    threads: 0,
    check: (chunk, firstSlot, slots) => Promise.resolve(whole.seqsOf(chunk, firstSlot, slots)),
    close: () => Promise.resolve(),
  }
}

export function startScanThreads(data: ScanThreadData, threads: number): ChunkChecker {
  const pending = new Map<number, { resolve: (seqs: Float64Array) => void; reject: (error: Error) => void }>()
  let failure: Error | null = null
  let closing = false
  const fail = (what: string): void => {
    failure ??= runtimeError(`a verify thread ${what}; the file was not judged`)
    for (const waiter of pending.values()) waiter.reject(failure)
    pending.clear()
  }
  const workers: Worker[] = Array.from({ length: threads }, () => {
    const worker = startModuleWorker(import.meta.url, 'scan-worker', data)
    worker.on('message', (reply: ScanReply) => {
      pending.get(reply.id)?.resolve(reply.seqs)
      pending.delete(reply.id)
    })
    worker.on('error', (error) => fail(`failed: ${error.message}`))
    worker.on('exit', (code) => {
      if (!closing) fail(`exited (code ${code})`)
    })
    return worker
  })
  let nextId = 0
  return {
    threads,
    check(chunk, firstSlot, slots) {
      const buffer = chunk.buffer
      if (!(buffer instanceof SharedArrayBuffer)) throw new Error('a chunk for the verify threads must lie in shared memory')
      const id = nextId++
      const answer = new Promise<Float64Array>((resolve, reject) => {
        if (failure !== null) return reject(failure)
        pending.set(id, { resolve, reject })
        const request: ScanRequest = { id, buffer, byteOffset: chunk.byteOffset, lengthBytes: chunk.length, firstSlot, slots }
        workers[id % workers.length]!.postMessage(request)
      })
      // The caller awaits answers in file order; one rejected behind the first is not unhandled.
      answer.catch(() => {})
      return answer
    },
    async close() {
      closing = true
      await Promise.all(workers.map((worker) => worker.terminate()))
    },
  }
}
