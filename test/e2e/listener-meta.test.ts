/**
 * A real write against a real listener, then one bit flipped in a field of the run's meta.msgpack in
 * the listener's --dir (its slot count, its record size). The file as the listener sealed it refuses
 * to load (its checksum). Rewritten as an older listener stored it (bare msgpack, no checksum), it
 * loads: the data file is intact and its superblock holds the right values, so verify names the field
 * and both values (exit 3) instead of failing the storage, offline (--acks) and through the listener
 * started again on that directory.
 */
import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Packr } from 'msgpackr'
import { seal, unseal } from '../../src/store/sealed-file.js'
import { runCli, runInProcess, startListener, tempDir } from '../fixtures/cli.js'

/** The listener's own encoding of meta.msgpack (src/store/ack-store.ts). */
const packr = new Packr({ useRecords: false, int64AsType: 'number', mapsAsObjects: true })

for (const [field, bit] of [
  ['slotCount', 256],
  ['recordSizeBytes', 512],
] as const) {
  t.test(`a flipped bit in meta.msgpack's ${field}: named, exit 3, never a FAIL of the intact file`, async (t) => {
    const dir = tempDir(t)
    const listenerDir = join(dir, 'listener')
    let listener = await startListener(listenerDir)
    t.teardown(() => listener.kill())
    const file = join(dir, 'data')
    // 4 MiB of 8 KiB records: 511 slots, which a second of writing wraps.
    const written = await runCli(['write', '--server', listener.server, '--file', file, '--size', '4MiB', '--duration', '1'])
    t.equal(written.code, 0, written.stderr)
    const runId = /^run ([0-9a-f]{16}):/m.exec(written.stdout)![1]!
    t.equal((await runInProcess(['verify', '--server', listener.server, '--file', file])).code, 0, 'intact: pass')
    // A clean stop: every run folded from the journal into runs/ (a SIGKILL would leave its last seconds in journal/).
    await listener.kill('SIGTERM')

    const metaPath = join(listenerDir, 'runs', runId, 'meta.msgpack')
    const sealed = unseal('meta', readFileSync(metaPath))
    if (sealed.kind !== 'sealed') throw new Error(`meta.msgpack is ${sealed.kind}, not sealed`)
    const stored = packr.unpack(sealed.body) as { meta: Record<string, number> }
    const right = stored.meta[field]!
    const wrong = right ^ bit
    stored.meta[field] = wrong

    // As the listener sealed it: the checksum refuses the flipped bit before anything is judged.
    const flipped = Buffer.concat([seal('meta', sealed.body).subarray(0, 16), packr.pack(stored)])
    writeFileSync(metaPath, flipped)
    const refused = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
    t.equal(refused.code, 3, refused.stdout)
    t.equal(refused.stdout, '')
    t.match(refused.stderr, metaPath)
    t.match(refused.stderr, 'checksum')

    // As an older listener stored it (no checksum): the superblock cross-check names the field.
    writeFileSync(metaPath, packr.pack(stored))

    const named = `${field} is ${wrong} at the listener, ${right} in the file; nothing was judged\n`
    const offline = await runInProcess(['verify', '--acks', listenerDir, '--file', file])
    t.equal(offline.code, 3, offline.stdout)
    t.equal(offline.stdout, '')
    t.match(
      offline.stderr,
      `plugcheck: the ack directory ${listenerDir} describes run ${runId} otherwise than the checksummed superblock of its data file ${file}: ${named}`,
    )
    t.match(offline.stderr, `hint: ${metaPath} is damaged, or the listener answered wrong: the storage under test is not to blame`)

    // The listener restarts from its catalog, which recorded the run as announced: the changed file is
    // damage it names (the run's queries are refused), never an answer from either version.
    listener = await startListener(listenerDir)
    const online = await runInProcess(['verify', '--server', listener.server, '--file', file])
    t.equal(online.code, 3, online.stdout)
    t.match(online.stderr, `could not read ${metaPath}: it says ${field} ${wrong}, where the listener recorded ${right}`)
  })
}
