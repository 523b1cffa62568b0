/**
 * A refused announcement stays refused across a restart: when storing a run fails after its
 * meta.msgpack was renamed into place (the rename reported EIO after taking effect, or the directory
 * fsync ran out of descriptors), what was created is removed, so replay does not bring back a run its
 * writer was told was refused and query() still answers with the previous run on the path.
 * Faults are injected at the file-system boundary (node:fs as the ack store sees it); files are real.
 */
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/server/ack-store.js'
import { tempDir } from '../fixtures/cli.js'
import { runIdOf, runMeta } from './peer.js'

const onPath = (runId: string) => runMeta(runId, { requestedPath: '/data/db', path: '/data/db' })

async function refusedAnnouncementStaysRefused(t: Test, fsOverrides: (dir: string) => Partial<typeof fs>, openSyncInDirectorySync = false): Promise<void> {
  const dir = tempDir(t)
  const previous = runIdOf(0xa1)
  const refused = runIdOf(0xa2)
  const store = await AckStore.open(dir)
  await store.createRun(onPath(previous), Date.now())
  await store.close()

  const faultyFs = { ...fs, ...fsOverrides(dir) }
  // The directory fsync lives in its own module: hand it the faulty node:fs when the fault is there.
  const directorySync = openSyncInDirectorySync ? await t.mockImport('../../src/directory-sync.js', { 'node:fs': faultyFs }) : await import('../../src/directory-sync.js')
  const { AckStore: FaultyStore } = await t.mockImport<typeof import('../../src/server/ack-store.js')>('../../src/server/ack-store.js', {
    'node:fs': faultyFs,
    '../../src/directory-sync.js': directorySync,
  })
  const faulty = await FaultyStore.open(dir)
  await t.rejects(faulty.createRun(onPath(refused), Date.now()), /could not store run 00000000000000a2/)
  t.notOk(faulty.hasRun(refused), 'the refused run is not in memory')
  await faulty.close()

  t.notOk(existsSync(join(dir, 'runs', refused, 'meta.msgpack')), 'its meta.msgpack was removed')
  const restarted = await AckStore.open(dir)
  t.teardown(() => restarted.close())
  t.notOk(restarted.hasRun(refused), 'the refused run does not come back after a restart')
  t.same(
    restarted.query('testhost', '/data/db').map((r) => r.meta.runId),
    [previous],
    'the latest run on the path is still the one before the refusal',
  )
}

t.test('a rename that takes effect and then reports EIO', async (t) => {
  await refusedAnnouncementStaysRefused(t, () => ({
    renameSync: (from: fs.PathLike, to: fs.PathLike) => {
      fs.renameSync(from, to)
      throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' })
    },
  }))
})

t.test('out of descriptors for the directory fsync after the rename', async (t) => {
  await refusedAnnouncementStaysRefused(t, (dir) => {
    let failed = false
    return {
      openSync: ((path: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode) => {
        // Fails once, like an EMFILE: the cleanup after it may open the directory again.
        if (!failed && path === join(dir, 'runs') && flags === 'r') {
          failed = true
          throw Object.assign(new Error('EMFILE: too many open files, open'), { code: 'EMFILE' })
        }
        return fs.openSync(path, flags ?? 'r', mode)
      }) as typeof fs.openSync,
    }
  }, true)
})
