/**
 * A refused announcement stays refused across a restart: when the journal round holding it fails (its
 * write is short, or its fdatasync reports EIO after the bytes reached the file), the round is cut off
 * the segment, so replay does not bring back a run its writer was told was refused, and query() still
 * answers with the previous run on the path. Faults are injected at the file-system boundary
 * (node:fs/promises as the ack store sees it); files are real.
 */
import t, { type Test } from 'tap'
import * as fsPromises from 'node:fs/promises'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../../src/store/ack-store.js'
import { tempDir } from '../../fixtures/cli.js'
import { runIdOf, runMeta } from '../../fixtures/peer.js'

const onPath = (runId: string) => runMeta(runId, { requestedPath: '/data/db', path: '/data/db' })

type Handle = Awaited<ReturnType<typeof fsPromises.open>>

/** open() whose handles on journal segments get overrides (only the first call of each fails). */
function faultyOpen(overrides: (handle: Handle) => Partial<Handle>): typeof fsPromises.open {
  return (async (path: Parameters<typeof fsPromises.open>[0], ...rest: unknown[]) => {
    const handle = await (fsPromises.open as (...args: unknown[]) => Promise<Handle>)(path, ...rest)
    if (!String(path).endsWith('.wal')) return handle
    return Object.assign(Object.create(handle) as Handle, overrides(handle))
  }) as typeof fsPromises.open
}

async function refusedAnnouncementStaysRefused(t: Test, handleOverrides: (handle: Handle) => Partial<Handle>): Promise<void> {
  const dir = tempDir(t)
  const previous = runIdOf(0xa1)
  const refused = runIdOf(0xa2)
  const store = await AckStore.open(dir)
  await store.createRun(onPath(previous), Date.now())
  await store.close()

  const { AckStore: FaultyStore } = await t.mockImport<typeof import('../../../src/store/ack-store.js')>(
    '../../../src/store/ack-store.js',
    {
      'node:fs/promises': { ...fsPromises, open: faultyOpen(handleOverrides) },
    },
  )
  const faulty = await FaultyStore.open(dir)
  await t.rejects(faulty.createRun(onPath(refused), Date.now()), /could not store run 00000000000000a2/)
  t.notOk(faulty.hasRun(refused), 'the refused run is not in memory')
  await faulty.close()

  t.notOk(existsSync(join(dir, 'runs', refused)), 'no directory was made for it')
  t.ok(readdirSync(join(dir, 'journal')).length > 0, 'the failed journal stays for the restart')
  const restarted = await AckStore.open(dir)
  t.teardown(() => restarted.close())
  t.notOk(restarted.hasRun(refused), 'the refused run does not come back after a restart')
  t.same(
    (await restarted.queryAsync('testhost', '/data/db')).map((r) => r.meta.runId),
    [previous],
    'the latest run on the path is still the one before the refusal',
  )
}

t.test('a journal fdatasync that reports EIO after the round reached the file', async (t) => {
  await refusedAnnouncementStaysRefused(t, (handle) => ({
    datasync: async () => {
      throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })
    },
    write: handle.write.bind(handle) as Handle['write'],
    truncate: handle.truncate.bind(handle),
    sync: handle.sync.bind(handle),
    close: handle.close.bind(handle),
    stat: handle.stat.bind(handle),
  }))
})

t.test('a short journal write (the disk filled mid-round)', async (t) => {
  await refusedAnnouncementStaysRefused(t, (handle) => ({
    write: (async (buffer: Buffer, offset: number, length: number, position: number) => {
      if (length < 100) return handle.write(buffer, offset, length, position) // the segment's header
      const { bytesWritten } = await handle.write(buffer, offset, Math.floor(length / 2), position)
      return { bytesWritten, buffer }
    }) as Handle['write'],
    datasync: handle.datasync.bind(handle),
    truncate: handle.truncate.bind(handle),
    sync: handle.sync.bind(handle),
    close: handle.close.bind(handle),
    stat: handle.stat.bind(handle),
  }))
})
