/**
 * Ack stores set up the way many tests need them, with the real store and real files: runs recorded
 * through the store and waited for until durable, long ended runs whose logs are written in bulk, and
 * a live run whose spans left memory and were read back once.
 */
import { appendFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import { AckStore, type RunOrigin } from '../../src/server/ack-store.js'
import { frameCommit, maxItemsPerCommit } from '../../src/server/ack-log.js'
import { spanWindowMs } from '../../src/server/span-table.js'
import type { RunMeta } from '../../src/record/format.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from './peer.js'

/** Resolves once the store has recorded runId's acks through throughSeq, or the run failed. */
export function recorded(store: AckStore, runId: string, throughSeq: number): Promise<void> {
  return new Promise((resolve) => {
    const on = (id: string, seq: number): void => {
      if (id !== runId || seq < throughSeq) return
      store.off('recorded', on)
      store.off('failed', onFailed)
      resolve()
    }
    const onFailed = (id: string): void => {
      if (id !== runId) return
      store.off('recorded', on)
      store.off('failed', onFailed)
      resolve()
    }
    store.on('recorded', on)
    store.on('failed', onFailed)
  })
}

/** meta announced at its createdMs, acks 1..acked (one item each) and its end, all recorded. */
export async function recordRun(store: AckStore, meta: RunMeta, acked: number, end: Parameters<AckStore['endRun']>[1], origin?: RunOrigin): Promise<void> {
  await store.createRun(meta, meta.createdMs, origin)
  const done = new Promise<void>((resolve) => store.on('recorded', (id, through) => void (id === meta.runId && through === acked && resolve())))
  for (let seq = 1; seq <= acked; seq++) store.appendAck(meta.runId, seq, seq, Date.now())
  store.endRun(meta.runId, end, undefined, Date.now())
  await done
}

/**
 * dir with ended runs of spanCount spans each (one ack a span, 200 ms apart from announcedMs, then an
 * end 'duration'), written straight into their logs, and no catalog: every run is replayed at start.
 */
export async function storeOfEndedRuns(dir: string, metas: readonly RunMeta[], spanCount: number, announcedMs: number, origin?: RunOrigin): Promise<void> {
  const store = await AckStore.open(dir)
  for (const meta of metas) await store.createRun(meta, announcedMs, origin)
  await store.close()
  for (const { runId } of metas) {
    const frames: Buffer[] = []
    let n = 0
    for (let seq = 1; seq <= spanCount; seq += maxItemsPerCommit) {
      const items: object[] = []
      for (let s = seq; s < Math.min(seq + maxItemsPerCommit, spanCount + 1); s++) items.push({ k: 'ack', fromSeq: s, toSeq: s, firstMs: announcedMs + s * 200, lastMs: announcedMs + s * 200 })
      frames.push(frameCommit(++n, items))
    }
    frames.push(frameCommit(++n, [{ k: 'end', reason: 'duration', atMs: announcedMs + (spanCount + 1) * 200 }]))
    appendFileSync(join(dir, 'runs', runId, 'acks.log'), Buffer.concat(frames))
  }
  rmSync(join(dir, 'catalog.msgpack'), { force: true })
}

export interface OutOfMemoryRun {
  readonly dir: string
  readonly store: AckStore
  readonly meta: RunMeta
  /** The path of the run's acks.log. */
  readonly log: string
  /** Records the next seq alone, then waits past the span window: a span of its own. */
  ackAlone(): Promise<void>
}

/**
 * A live run in a store that keeps one span per run in memory: seqs 1..3 recorded, a span each, and
 * folded out of the journal, so the next query reads the run back from its log (and caches the copy).
 * The store is closed at teardown.
 */
export async function liveRunOutOfMemory(t: Test, runNumber: number, dirPrefix: string): Promise<OutOfMemoryRun> {
  const dir = tempDir(t, dirPrefix)
  const store = await AckStore.open(dir, { residentSpansMax: 1 })
  t.teardown(() => store.close())
  const meta = runMeta(runIdOf(runNumber))
  await store.createRun(meta, Date.now())
  let seq = 0
  const ackAlone = async (): Promise<void> => {
    const done = recorded(store, meta.runId, seq + 1)
    store.appendAck(meta.runId, seq + 1, seq + 1, Date.now())
    seq++
    await done
    await sleep(spanWindowMs + 10)
  }
  for (let i = 0; i < 3; i++) await ackAlone()
  await store.foldNow()
  return { dir, store, meta, log: join(dir, 'runs', meta.runId, 'acks.log'), ackAlone }
}
