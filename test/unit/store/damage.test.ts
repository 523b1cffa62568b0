/**
 * Damage in the listener directory is a refusal, never fewer runs or fewer acks: a run whose
 * meta.msgpack is missing (while its log holds acks), unreadable or invalid stops the listener from
 * starting and verify --acks with exit 3 naming the file, instead of judging the rest of its group or
 * an older run of the path. Only an announcement that never completed (no meta.msgpack, an empty log)
 * is skipped. A bit flipped anywhere in meta.msgpack is caught by its checksum. In acks.log only the
 * last entry can be torn: a bad entry with data after it is damage, refused; in the last entry, or
 * followed by zeros, a torn tail (ack-log.test.ts has the rule case by case).
 */
import t, { type Test } from 'tap'
import { closeSync, mkdirSync, openSync, readFileSync, readSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { Listener } from '../../../src/server/listen/listener.js'
import { AckStore } from '../../../src/store/ack-store.js'
import { seal, unseal } from '../../../src/store/sealed-file.js'
import { runInProcess, tempDir } from '../../fixtures/cli.js'
import { craftMeta, range, writeDataFile } from '../../fixtures/crafted-run.js'
import { Peer, runIdOf, runMeta } from '../../fixtures/peer.js'
import { listenerRefuses } from '../../fixtures/damage-refusal.js'

const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

/** The decoded body of a sealed meta.msgpack. */
function readMeta(path: string): unknown {
  const file = unseal('meta', readFileSync(path))
  if (file.kind !== 'sealed') throw new Error(`${path} is not sealed (${file.kind})`)
  return packr.unpack(file.body)
}

/**
 * A group on one path (fdatasync, and the none control when two ids are given) announced to a real
 * listener, acks 1..seqs each (with everyAck, one commit per ack), and data files in which records
 * 4 and 5 are lost: verify's verdict on the intact group is FAIL (exit 1).
 */
async function storeWithGroup(dir: string, runIds: string[], seqs: number, everyAck = false): Promise<string> {
  const file = join(dir, 'data')
  const metas = runIds.map((runId, i) =>
    craftMeta(runId, `${file}.${i === 0 ? 'fdatasync' : 'none'}`, {
      groupId: runIds[0]!,
      requestedPath: file,
      method: i === 0 ? 'fdatasync' : 'none',
      createdMs: Date.now(),
    }),
  )
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.open(listener.address().port)
  peer.send({ type: 'hello', protocol: 2, role: 'writer' })
  for (const meta of metas) {
    peer.send({ type: 'run', meta })
    await peer.next('run-ok')
  }
  for (const { runId } of metas) {
    for (let seq = 1; seq <= seqs; seq++) {
      peer.send({ type: 'ack', runId, fromSeq: seq, toSeq: seq })
      if (everyAck || seq === seqs) {
        let recorded = 0
        while (recorded < seq) recorded = ((await peer.next('recorded')) as { throughSeq: number }).throughSeq
      }
    }
    peer.send({ type: 'end', runId, reason: 'duration' })
  }
  peer.close()
  await listener.close()
  for (const meta of metas) writeDataFile(meta, range(1, Math.min(3, seqs)), { sizeSlots: seqs })
  return file
}

const verifyAcks = (dir: string) => runInProcess(['verify', '--acks', dir, '--file', join(dir, 'data')])

/** The listener refuses to start and verify --acks exits 3, both naming the file, no stack trace. */
async function refused(t: Test, dir: string, message: string | RegExp): Promise<void> {
  await listenerRefuses(t, dir, message)
  const verify = await verifyAcks(dir)
  t.equal(verify.code, 3, `verify --acks exits 3 (${verify.stderr.trim().split('\n')[0]})`)
  t.match(verify.stderr, message)
  t.notMatch(verify.stderr, /\n\s+at |\(\[\)/, 'no stack trace, no raw schema dump')
  t.equal(verify.stdout, '', 'no verdict')
}

t.test("a run's damaged or missing meta.msgpack is a refusal, never a group judged without it", async (t) => {
  const synced = runIdOf(0xd1)
  const control = runIdOf(0xd2)
  const cases: Array<[string, (metaPath: string) => void, RegExp]> = [
    [
      'missing while its log holds acks',
      (p) => rmSync(p),
      /could not read \S+meta\.msgpack: it is missing, but \S+acks\.log holds \d+ bytes of acks/,
    ],
    ['cut in half', (p) => truncateSync(p, Math.floor(statSync(p).size / 2)), /could not read \S+meta\.msgpack: /],
    ['empty', (p) => truncateSync(p, 0), /could not read \S+meta\.msgpack: its 0 bytes are not valid msgpack/],
    [
      'valid msgpack with a field out of bounds, checksum and all',
      (p) => {
        const file = readMeta(p) as { meta: { recordSizeBytes: number } }
        file.meta.recordSizeBytes = 2 ** 30
        writeFileSync(p, seal('meta', packr.pack(file)))
      },
      /could not read \S+meta\.msgpack: field meta\.recordSizeBytes is not valid \(too big/,
    ],
    [
      "an older listener's file (no checksum) without a field",
      (p) => {
        const file = readMeta(p) as { announcedMs?: number }
        delete file.announcedMs
        writeFileSync(p, packr.pack(file))
      },
      /could not read \S+meta\.msgpack: field announcedMs is missing/,
    ],
    [
      'a bit flipped in its checksum',
      (p) => flipByte(p, 12),
      /could not read \S+meta\.msgpack: it does not match its checksum \(damaged\)/,
    ],
    [
      'a bit flipped in its header',
      (p) => flipByte(p, 3),
      /could not read \S+meta\.msgpack: its header is not a plugcheck file header \(damaged\)/,
    ],
    [
      'a bit flipped in its first byte',
      (p) => flipByte(p, 0),
      /could not read \S+meta\.msgpack: (its \d+ bytes are not valid msgpack|it is not a run's metadata)/,
    ],
    [
      'a verdict file in its place',
      (p) => writeFileSync(p, seal('verdict', packr.pack({ runId: synced }))),
      /could not read \S+meta\.msgpack: it holds a verdict, not a run's metadata \(damaged\)/,
    ],
  ]
  for (const [name, damage, message] of cases) {
    await t.test(name, async (t) => {
      const dir = tempDir(t)
      await storeWithGroup(dir, [synced, control], 5)
      const before = await verifyAcks(dir)
      t.equal(before.code, 1, `the intact group: FAIL, records 4 and 5 lost (${before.stdout.split('\n')[0]})`)
      damage(join(dir, 'runs', synced, 'meta.msgpack'))
      await refused(t, dir, message)
    })
  }
})

t.test('an announcement that never completed (no meta.msgpack, empty log) is skipped with a warning', async (t) => {
  const dir = tempDir(t)
  await storeWithGroup(dir, [runIdOf(0xd3)], 5)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.writer(listener.address().port, runMeta(runIdOf(0xd4)))
  peer.close()
  await listener.close()
  // What createRun leaves when it dies before the rename: the log, empty, and no meta.msgpack.
  rmSync(join(dir, 'runs', runIdOf(0xd4), 'meta.msgpack'))
  truncateSync(join(dir, 'runs', runIdOf(0xd4), 'acks.log'), 0)
  // Such a run never reached a catalog (only runs folded whole do): the catalog of the clean stop goes too.
  rmSync(join(dir, 'catalog.msgpack'))
  const store = await AckStore.load(dir)
  t.match(store.warnings, [`run ${runIdOf(0xd4)}: no metadata and an empty ack log (its announcement never completed), skipped`])
  t.equal(store.lastAckedSeq(runIdOf(0xd3)), 5, 'the other run is served')
  t.notOk(store.hasRun(runIdOf(0xd4)))
  rmSync(join(dir, 'runs', runIdOf(0xd4), 'acks.log'))
  t.match((await AckStore.load(dir)).warnings, [/no metadata and an empty ack log/], 'no log at all: the same')
})

function flipByte(path: string, position: number): void {
  const fd = openSync(path, 'r+')
  try {
    const byte = Buffer.alloc(1)
    readSync(fd, byte, 0, 1, position)
    byte[0] = byte[0]! ^ 0x10
    writeSync(fd, byte, 0, 1, position)
  } finally {
    closeSync(fd)
  }
}

t.test('one flipped bit in acks.log: early, a refusal; in the last entry, a torn tail', async (t) => {
  const runId = runIdOf(0xd5)
  const seqs = 1500
  const base = tempDir(t)
  await storeWithGroup(base, [runId], seqs, true)
  const log = join(base, 'runs', runId, 'acks.log')
  const size = statSync(log).size
  t.ok(size > 80 * 1024, `the log (${size} bytes) is longer than one commit writes (64 KiB)`)

  const copy = (name: string): string => {
    const dir = join(base, name)
    for (const file of ['meta.msgpack', 'acks.log']) {
      const target = join(dir, 'runs', runId)
      mkdirSync(target, { recursive: true })
      writeFileSync(join(target, file), readFileSync(join(base, 'runs', runId, file)))
    }
    return dir
  }

  await t.test('a byte flipped in the second entry: every later ack would be lost, so refused', async (t) => {
    const dir = copy('early')
    flipByte(join(dir, 'runs', runId, 'acks.log'), 100)
    await listenerRefuses(
      t,
      dir,
      new RegExp(
        `could not read ${join(dir, 'runs', runId, 'acks.log')}: damaged at byte \\d+: the entry there (does not match its checksum|has a length no entry has)`,
      ),
    )
    const verify = await verifyAcks(dir)
    t.equal(verify.code, 3, verify.stderr)
    t.match(verify.stderr, `could not read ${join(dir, 'runs', runId, 'acks.log')}: damaged at byte`)
    t.equal(verify.stdout, '')
  })

  await t.test('a byte flipped in the last entry: a torn tail, the rest kept', async (t) => {
    const dir = copy('late')
    flipByte(join(dir, 'runs', runId, 'acks.log'), size - 3)
    const store = await AckStore.load(dir)
    // The last entry is the run's 'vanished' end (its writer closed): it is the torn one.
    t.equal(store.lastAckedSeq(runId), seqs, 'every ack kept')
    t.equal(store.runInfo(runId)!.ended, false, 'the torn end is not replayed')
    t.match(store.warnings, [/ignored \d+ bytes of a torn ack log tail/])
  })

  await t.test('a byte flipped early and zeros after it (a preallocated tail): still damage', async (t) => {
    const dir = copy('zeros')
    const copyLog = join(dir, 'runs', runId, 'acks.log')
    truncateSync(copyLog, size + 1024 * 1024)
    flipByte(copyLog, 100)
    await t.rejects(AckStore.load(dir), {
      exitCode: 3,
      message: /damaged at byte \d+: the entry there does not match its checksum, and \d+ bytes of data/,
    })
  })
})

/** Flips mask in byte `offset` of the msgpack value of `key` in a sealed meta.msgpack (a fixstr key of under 32 bytes). */
function flipMetaField(path: string, key: string, offset: number, mask: number): void {
  const bytes = readFileSync(path)
  const at = bytes.indexOf(Buffer.concat([Buffer.from([0xa0 | key.length]), Buffer.from(key)]))
  if (at < 0) throw new Error(`no ${key} in ${path}`)
  bytes[at + 1 + key.length + offset]! ^= mask
  writeFileSync(path, bytes)
}

t.test("one bit flipped in meta.msgpack's record size or slot count: a refusal naming the file, never an intact file judged", async (t) => {
  // Values a flip keeps within the schema: record size 512 read as 1536, slot count 16 read as 24.
  const cases: Array<[string, number, number]> = [
    ['recordSizeBytes', 1, 0x04],
    ['slotCount', 0, 0x08],
  ]
  for (const [key, offset, mask] of cases) {
    await t.test(key, async (t) => {
      const dir = tempDir(t)
      const runId = runIdOf(0xd6)
      const file = join(dir, 'data')
      const meta = craftMeta(runId, file, { requestedPath: file, slotCount: 16, createdMs: Date.now() })
      const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
      const peer = await Peer.writer(listener.address().port, meta)
      peer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 20 })
      await peer.next('recorded')
      peer.send({ type: 'end', runId, reason: 'duration' })
      await peer.next('recorded')
      peer.close()
      await listener.close()
      writeDataFile(meta, range(1, 20), { sizeSlots: 16 })
      const before = await verifyAcks(dir)
      t.equal(before.code, 0, `the intact run passes (${before.stdout.split('\n')[0]})`)
      const metaPath = join(dir, 'runs', runId, 'meta.msgpack')
      flipMetaField(metaPath, key, offset, mask)
      await refused(t, dir, new RegExp(`could not read ${metaPath}: it does not match its checksum \\(damaged\\)`))
    })
  }
})
