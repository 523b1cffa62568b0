/**
 * Retention prunes run by run, never a group as a whole: the runs of one `write --jobs` (or several
 * methods) end moments apart, and a prune whose age falls between their ends removes some members
 * and keeps the others. Verify of that group is then refused (a file of the group whose run the
 * listener does not return: exit 3), so the evidence of every member, kept or not, can no longer be
 * judged. A group must be pruned whole or not at all (kept while any member is kept); verify of the
 * kept group then judges it (here: every acknowledged record intact, a pass, exit 0).
 */
import t from 'tap'
import { join } from 'node:path'
import { Listener } from '../../src/server/listen/listener.js'
import { craftMeta, range, writeDataFile } from '../fixtures/crafted-run.js'
import { runCli, runInProcess, sleep, startListener, tempDir } from '../fixtures/cli.js'
import { Peer } from '../fixtures/peer.js'

t.test('a prune whose age falls between the ends of one group keeps the whole group, and verify judges it', async (t) => {
  const base = tempDir(t)
  const dir = join(base, 'acks')
  const path = join(base, 'data')
  const group = 'aaaaaaaaaaaaaaaa'
  const metas = [1, 2].map((job) =>
    craftMeta(
      `${job}`
        .repeat(16)
        .slice(0, 16)
        .replace(/./g, (c) => (c === '1' ? 'b' : 'c')),
      `${path}.job${job}`,
      { groupId: group, requestedPath: path },
    ),
  )
  for (const meta of metas) writeDataFile(meta, range(1, 50), { sizeSlots: meta.slotCount })

  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const peer = await Peer.open(listener.address().port)
  peer.send({ type: 'hello', protocol: 3, role: 'writer' })
  for (const meta of metas) {
    peer.send({ type: 'run', meta })
    await peer.next('run-ok')
    peer.send({ type: 'ack', runId: meta.runId, fromSeq: 1, toSeq: 50 })
  }
  // Job 1 ends, job 2 later (jobs end on their own, a slow sync apart). Job 1 is past the age given
  // (6 s) whatever the machine's speed (the gap is 8 s at least); job 2 must still be younger than it
  // when the prune looks, which leaves 6 s for closing the listener and starting the prune on a
  // loaded machine (3 s of room was not always enough there).
  peer.send({ type: 'end', runId: metas[0]!.runId, reason: 'duration' })
  await sleep(8000)
  peer.send({ type: 'end', runId: metas[1]!.runId, reason: 'duration' })
  while (((await peer.next('recorded')) as { runId: string }).runId !== metas[1]!.runId);
  peer.close()
  await sleep(200)
  await listener.close()

  // Job 1 ended over 6 s ago, job 2 not yet: a prune run by run would prune job 1 (pruned 1 run).
  const prune = await runInProcess(['runs', '--prune', '--older-than', '6s', '--dir', dir])
  t.equal(prune.code, 0, prune.stderr)
  t.match(prune.stdout, /^pruned 0 runs/, `no member of a group whose other member is too recent is pruned (${prune.stdout.trim()})`)

  const served = await startListener(dir)
  t.teardown(() => served.kill())
  const verify = await runCli(['verify', '--server', served.server, '--file', path])
  t.equal(verify.code, 0, `the group is judged: ${verify.stdout}${verify.stderr}`)
})
