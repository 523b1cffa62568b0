/**
 * The listener's metadata of a run against its data file's checksummed superblock: a stand-in
 * listener answers with one field of an intact run's metadata changed, as a flipped bit in its
 * meta.msgpack or a buggy listener would. Every field is named with both values (exit 3), never judged
 * as a storage loss; a path no write makes is refused the same way. A superblock that holds another
 * run is still a lost file creation (FAIL), a zeroed one is still judged from the listener's
 * metadata, and a listener of an earlier version that drops the run's place in its group is no
 * disagreement.
 */
import t from 'tap'
import { closeSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { RunMeta } from '../../../../src/record/format.js'
import { craftMeta, craftRun, listenerWith, range, writeDataFile } from '../../../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../../../fixtures/cli.js'

/** An intact run of 20 acknowledged records in a 1000-slot file, and a listener describing it with `over` changed. */
async function verifyWith(t: { teardown(fn: () => unknown): void }, over: Partial<RunMeta>, file?: string) {
  const path = file ?? join(tempDir(t), 'data')
  const meta = craftMeta('f000000000000001', path, { member: { job: 1, jobs: 1, methods: ['fdatasync'] } })
  writeDataFile(meta, range(1, 20), { sizeSlots: 20 })
  const described: Record<string, unknown> = { ...meta, ...over }
  for (const key of Object.keys(described)) if (described[key] === undefined) delete described[key] // absent, as a listener sends it
  const server = await listenerWith(t, [craftRun(described as RunMeta, 20)])
  return { meta, server, result: await runInProcess(['verify', '--server', server, '--file', path]) }
}

t.test("one field of the listener's metadata changed: named with both values, exit 3, nothing judged", async (t) => {
  const changes: Array<[string, Partial<RunMeta>, string]> = [
    [
      'slot count (a flipped bit: the listener thinks the file wrapped)',
      { slotCount: 16 },
      'slotCount is 16 at the listener, 1000 in the file',
    ],
    ['record size', { recordSizeBytes: 1024 }, 'recordSizeBytes is 1024 at the listener, 512 in the file'],
    [
      'method (a tested method taken for the control)',
      { method: 'none', member: { job: 1, jobs: 1, methods: ['none'] } },
      'member is {"job":1,"jobs":1,"methods":["none"]} at the listener, {"job":1,"jobs":1,"methods":["fdatasync"]} in the file; method is "none" at the listener, "fdatasync" in the file',
    ],
    ['pattern', { pattern: 'overwrite' }, 'pattern is "overwrite" at the listener, "append" in the file'],
    ['direct', { direct: true }, 'direct is true at the listener, false in the file'],
    ['created time', { createdMs: craftMeta('f000000000000001', 'x').createdMs - 86_400_000 }, 'createdMs is'],
    ['group id', { groupId: 'f0000000000000ff' }, 'groupId is "f0000000000000ff" at the listener, "f000000000000001" in the file'],
  ]
  for (const [name, over, named] of changes) {
    const { server, result } = await verifyWith(t, over)
    t.equal(result.code, 3, `${name}: exit 3`)
    t.equal(result.stdout, '', `${name}: no verdict printed`)
    t.match(
      result.stderr,
      /^plugcheck: the listener 127\.0\.0\.1:\d+ describes run f000000000000001 otherwise than the checksummed superblock of its data file \S+: /,
      name,
    )
    t.match(result.stderr, named, name)
    t.match(
      result.stderr,
      /; nothing was judged\nhint: the listener's copy \(runs\/f000000000000001\/meta\.msgpack in its --dir\) is damaged, or the listener answered wrong: the storage under test is not to blame/,
      name,
    )
    t.ok(server)
  }
})

t.test('the same metadata with nothing changed passes', async (t) => {
  t.equal((await verifyWith(t, {})).result.code, 0)
})

t.test('a path no write makes (a flipped bit in it) is refused, not judged as a missing file', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'data')
  const meta = craftMeta('f000000000000002', file)
  writeDataFile(meta, range(1, 20), { sizeSlots: 20 })
  const result = await runInProcess([
    'verify',
    '--server',
    await listenerWith(t, [craftRun({ ...meta, path: join(dir, 'dbta') }, 20)]),
    '--file',
    file,
  ])
  t.equal(result.code, 3)
  t.match(
    result.stderr,
    `describes run f000000000000002 (fdatasync) with the data file ${join(dir, 'dbta')}, which no write of ${file} makes; nothing was judged`,
  )
  // The same with the run's place in the group: the listener's answer is not even a valid run.
  const placed = craftMeta('f000000000000003', file, { member: { job: 1, jobs: 1, methods: ['fdatasync'] } })
  const invalid = await runInProcess([
    'verify',
    '--server',
    await listenerWith(t, [craftRun({ ...placed, path: join(dir, 'dbta') }, 20)]),
    '--file',
    file,
  ])
  t.equal(invalid.code, 3)
  t.match(invalid.stderr, /member\.job/)
})

t.test('a superblock of another run is a lost file creation (FAIL), not a disagreement', async (t) => {
  const file = join(tempDir(t), 'data')
  const judged = craftMeta('f000000000000004', file, { slotCount: 40 })
  // An older write's run, with other sizes: the new run's file creation did not survive.
  writeDataFile(craftMeta('f000000000000005', file, { createdMs: judged.createdMs - 5000, slotCount: 1000 }), range(1, 20), {
    sizeSlots: 20,
  })
  const result = await runInProcess(['verify', '--server', await listenerWith(t, [craftRun(judged, 20)]), '--file', file])
  t.equal(result.code, 1, result.stderr)
  t.match(result.stdout, /the file holds run f000000000000005 .*, not run f000000000000004: the new file did not survive/)
})

t.test("a zeroed superblock: judged from the listener's metadata as before", async (t) => {
  const file = join(tempDir(t), 'data')
  const meta = craftMeta('f000000000000006', file)
  writeDataFile(meta, range(1, 20), { sizeSlots: 20 })
  const fd = openSync(file, 'r+')
  writeSync(fd, Buffer.alloc(meta.recordSizeBytes), 0, meta.recordSizeBytes, 0)
  closeSync(fd)
  const result = await runInProcess([
    'verify',
    '--server',
    await listenerWith(t, [craftRun({ ...meta, slotCount: 999 }, 20)]),
    '--file',
    file,
  ])
  t.equal(result.code, 1)
  t.match(result.stdout, /^FAIL: the superblock of run f000000000000006 .* did not survive: superblock is zeros\.$/m)
  t.match(result.stdout, /Its 20 acknowledged records are intact/)
})

t.test("a listener of an earlier version drops the run's place in its group: not a disagreement", async (t) => {
  const { result } = await verifyWith(t, { member: undefined })
  t.equal(result.code, 0, result.stderr)
})
