/**
 * verify --acks DIR with a catalog that holds a run DIR does not (a catalog of another directory put
 * in, or a run directory removed): the listener on DIR names that run and refuses its queries only,
 * and judges every other run (README: "the other runs are answered"); verify --acks ("the same
 * judgements offline") refuses to judge any run of DIR (exit 3, naming the other run), even one whose
 * files are whole and whose data file holds every acknowledged record. It must judge that run as the
 * listener does: PASS, exit 0.
 */
import t from 'tap'
import { copyFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { AckStore } from '../../src/store/ack-store.js'
import { runCli, tempDir } from '../fixtures/cli.js'
import { storeRecords } from '../../src/report/load.js'
import { craftMeta, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runIdOf } from '../fixtures/peer.js'
import { recordRun } from '../fixtures/store-fixture.js'

async function directoryWith(dir: string, runId: string, path: string, acked: number): Promise<ReturnType<typeof craftMeta>> {
  mkdirSync(dir, { recursive: true })
  const store = await AckStore.open(dir)
  const meta = craftMeta(runId, path)
  await recordRun(store, meta, acked, 'duration', { peer: '127.0.0.1' })
  await store.close()
  return meta
}

t.test("verify --acks judges a whole run although the catalog holds another directory's run", async (t) => {
  const base = tempDir(t)
  const mine = join(base, 'listener-a')
  const other = join(base, 'listener-b')
  const meta = await directoryWith(mine, runIdOf(0x45001), join(base, 'a.dat'), 30)
  await directoryWith(other, runIdOf(0x45002), join(base, 'b.dat'), 5)
  writeDataFile(meta, range(1, 30), { sizeSlots: meta.slotCount })
  const control = await runCli(['verify', '--acks', mine, '--file', meta.path, '--run', meta.runId])
  t.equal(control.code, 0, `with its own catalog: PASS, exit 0 (got ${control.code}: ${control.stderr})`)
  copyFileSync(join(other, 'catalog.msgpack'), join(mine, 'catalog.msgpack'))

  const r = await runCli(['verify', '--acks', mine, '--file', meta.path, '--run', meta.runId])
  t.equal(r.code, 0, `PASS, exit 0, as the listener on that directory judges it (got ${r.code}: ${r.stdout}${r.stderr})`)
  t.match(r.stdout, /PASS/, 'the verdict is given')
})

t.test(
  "the report's reading of a directory whose catalog holds another directory's run: that run named in a warning and left out, the others listed",
  async (t) => {
    const base = tempDir(t)
    const mine = join(base, 'listener-a')
    const other = join(base, 'listener-b')
    const meta = await directoryWith(mine, runIdOf(0x45011), join(base, 'a.dat'), 12)
    await directoryWith(other, runIdOf(0x45012), join(base, 'b.dat'), 5)
    copyFileSync(join(other, 'catalog.msgpack'), join(mine, 'catalog.msgpack'))
    const { records, warnings } = await storeRecords(mine)
    t.same(
      records.map((r) => [r.summary.runId, r.summary.ackedThroughSeq]),
      [[meta.runId, 12]],
      'the run that is there, with its acks; the absent one left out',
    )
    t.match(
      warnings.join('\n'),
      new RegExp(`run ${runIdOf(0x45012)}: could not read ${join(mine, 'runs', runIdOf(0x45012))}: the run's directory is gone`),
      'the absent run named',
    )
  },
)
