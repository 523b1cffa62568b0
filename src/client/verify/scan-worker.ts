/**
 * One of verify's checking threads (client/verify/scan-threads.ts): for each chunk the main thread read into
 * a shared buffer, the whole-record check of every slot in it (record/scan.ts), returned as one
 * Float64Array of seqs (0: not accepted, for the main thread's slow path). It never judges: a thread
 * only says which records are provably whole.
 *
 * PLUGCHECK_SCAN_THREAD_FAULT (tests only): `start` throws while the thread loads, a number N throws
 * on the thread's Nth chunk, so tests can show that a failed thread stops verify.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { runKey } from '../../record/records.js'
import { WholeRecordCheck } from '../../record/scan.js'
import type { ScanReply, ScanRequest, ScanThreadData } from './scan-threads.js'

const fault = process.env.PLUGCHECK_SCAN_THREAD_FAULT
if (fault === 'start') throw new Error('PLUGCHECK_SCAN_THREAD_FAULT=start')
const faultAtChunk = fault === undefined ? 0 : Number(fault)

const port = parentPort!
const data = workerData as ScanThreadData
const check = new WholeRecordCheck(runKey(data.runId), data.recordSizeBytes, data.pattern, data.slotCount)
let chunks = 0
port.on('message', (request: ScanRequest) => {
  if (++chunks === faultAtChunk) throw new Error(`PLUGCHECK_SCAN_THREAD_FAULT=${fault}`)
  const seqs = check.seqsOf(Buffer.from(request.buffer, request.byteOffset, request.lengthBytes), request.firstSlot, request.slots)
  port.postMessage({ id: request.id, seqs } satisfies ScanReply, [seqs.buffer])
})
