/**
 * Retention: `plugcheck runs --prune` on a listener's directory (ended runs older than the age, never
 * a live, unended or in-progress campaign's run; a dry run; the bytes freed; refused while a listener
 * holds the directory), the store's prune (all or nothing), a prune killed with SIGKILL at random
 * moments (never damage, never fewer acks: each run whole or gone), and `listen --retain`.
 */
import t from 'tap'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../../../src/server/listen/listener.js'
import { AckStore } from '../../../../src/store/ack-store.js'
import { runInProcess, sleep, spawnCli, startListener, tempDir, waitFor, type ListenerChild } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'
import type { ListenerEvent } from '../../../../src/server/listen/events.js'
import { campaignFileText, type CampaignFile } from '../../../../src/store/campaign-file.js'
import { describeKept, selectPrunable } from '../../../../src/server/listen/prune.js'
import { verdictOf } from '../../../fixtures/verdict-fixture.js'

/** Fills dir with `ended` runs, run n acked 1..n and ended; `campaign` tags them. */
async function fill(dir: string, ended: number, campaign?: string): Promise<void> {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const port = listener.address().port
  const peers: Peer[] = []
  for (let n = 1; n <= ended; n++) {
    if ((n - 1) % 60 === 0) {
      peers.push(await Peer.open(port))
      peers.at(-1)!.send({ type: 'hello', protocol: 3, role: 'writer' })
    }
    const peer = peers.at(-1)!
    peer.send({ type: 'run', meta: runMeta(runIdOf(n)), ...(campaign === undefined ? {} : { campaign: { name: campaign, cycle: 1 } }) })
    await peer.next('run-ok')
    peer.send({ type: 'ack', runId: runIdOf(n), fromSeq: 1, toSeq: n })
    peer.send({ type: 'end', runId: runIdOf(n), reason: 'duration' })
    while (((await peer.next('recorded')) as { throughSeq: number }).throughSeq < n);
  }
  for (const p of peers) p.close()
  await waitFor('every connection gone', () => listener.connectionCount() === 0)
  await listener.close()
}

function runDirs(dir: string): string[] {
  return readdirSync(join(dir, 'runs')).sort()
}

/** `listen --retain` with a pass every 200 ms, each saying when it is done (PLUGCHECK_TEST_RETAIN_TICK_MS). */
async function startRetaining(dir: string, extra: readonly string[]): Promise<ListenerChild> {
  process.env.PLUGCHECK_TEST_RETAIN_TICK_MS = '200'
  try {
    return await startListener(dir, extra)
  } finally {
    delete process.env.PLUGCHECK_TEST_RETAIN_TICK_MS
  }
}

/** The number of the latest retention pass the listener has spoken of. */
const latestPass = (listener: ListenerChild): number =>
  Math.max(0, ...[...listener.stderr().matchAll(/retention pass (\d+)/g)].map((m) => Number(m[1])))

/**
 * Two whole passes begun after now: the pass after the latest one named may have read the clock
 * already, so the ones counted are the two after it.
 */
async function twoPassesFromNow(listener: ListenerChild): Promise<void> {
  const last = latestPass(listener) + 3
  await waitFor(`retention pass ${last}`, () => listener.stderr().includes(`retention pass ${last} done`), 20_000, 20)
}

t.test('runs --prune: a dry run, then the ended runs older than the age; live and recent runs stay; the bytes freed', async (t) => {
  const dir = tempDir(t)
  await fill(dir, 6)
  const store = await AckStore.open(dir)
  const totalBytes = store.usage().total.bytes
  await store.close()
  // The six runs past the age (6 s) by the time the prunes look, however slow the machine (the sleep
  // is at least that); the recent run under it, with 6 s of room for closing a listener and two
  // prunes' store loads on a loaded machine (2 s of room was not always enough).
  await sleep(6100)
  // One more ended run, recent: not pruned at 6s.
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  const recent = await Peer.writer(listener.address().port, runMeta(runIdOf(100)))
  recent.send({ type: 'end', runId: runIdOf(100), reason: 'duration' })
  await recent.next('recorded')
  recent.close()
  await listener.close()

  // In this process: a child's start-up would age the recent run past the age given.
  const dry = await runInProcess(['runs', '--prune', '--older-than', '6s', '--dir', dir, '--dry-run'])
  t.equal(dry.code, 0, dry.stderr)
  t.match(dry.stdout, new RegExp(`^would prune 6 runs that ended over 6s ago, ${(totalBytes / 1024).toFixed(1)} KiB\\n`))
  t.equal(runDirs(dir).length, 7, 'a dry run removes nothing')

  const json = await runInProcess(['runs', '--prune', '--older-than', '6s', '--dir', dir, '--json'])
  t.equal(json.code, 0, json.stderr)
  const report = JSON.parse(json.stdout) as { runs: number; bytes: number; pruned: string[]; dryRun: boolean }
  t.same({ runs: report.runs, bytes: report.bytes, dryRun: report.dryRun }, { runs: 6, bytes: totalBytes, dryRun: false })
  t.same(runDirs(dir), [runIdOf(100)], 'only the recent run is left')
  const after = await AckStore.load(dir)
  t.same(
    after.summaries().map((s) => s.runId),
    [runIdOf(100)],
  )
  t.same(after.usage().total.runs, 1)

  const none = await runInProcess(['runs', '--prune', '--older-than', '30d', '--dir', dir])
  t.match(none.stdout, /^pruned 0 runs that ended over 30d ago, 0 bytes\n$/)
})

t.test('runs --prune is refused while a listener holds the directory, and bad flags are usage errors', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(dir)
  t.teardown(() => listener.kill())
  const held = await runInProcess(['runs', '--prune', '--older-than', '30d', '--dir', dir])
  t.equal(held.code, 2)
  t.match(
    held.stderr,
    /another plugcheck \(a listener or a prune\) holds .*'s lock: runs are pruned with the listener stopped\nhint: stop the listener \(or wait for the other prune\) and prune again, or let the listener prune as it runs: plugcheck listen --retain AGE/,
  )
  for (const [args, message] of [
    [['--prune', '--dir', dir], /--prune needs --older-than AGE/],
    [['--prune', '--older-than', '30d'], /--prune needs --dir DIR/],
    [['--prune', '--older-than', '30 days', '--dir', dir], /--older-than 30 days is not a duration \(examples: 30d, 12h, 90m, 45s\)/],
    [['--older-than', '30d', '--server', listener.server], /--older-than, --dir and --dry-run go with --prune/],
    [[], /give --server HOST\[:PORT\]/],
  ] as const) {
    const r = await runInProcess(['runs', ...args])
    t.equal(r.code, 2, args.join(' '))
    t.match(r.stderr, message)
  }
})

t.test("the store's prune is all or nothing: an unended run, a live one or an unknown one refuses the lot", async (t) => {
  const dir = tempDir(t)
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
  t.teardown(() => listener.close())
  const port = listener.address().port
  const ended = await Peer.writer(port, runMeta(runIdOf(1)))
  ended.send({ type: 'end', runId: runIdOf(1), reason: 'duration' })
  await ended.next('recorded')
  const live = await Peer.writer(port, runMeta(runIdOf(2)))
  await t.rejects(listener.store.prune([runIdOf(1), runIdOf(2)]), /not pruned: run 0000000000000002 has not ended/)
  await t.rejects(listener.store.prune([runIdOf(9)]), /run 0000000000000009 is not on record/)
  t.ok(listener.store.hasRun(runIdOf(1)), 'nothing removed')
  const before = listener.store.usage().total
  await listener.store.prune([runIdOf(1)])
  t.notOk(existsSync(join(dir, 'runs', runIdOf(1))))
  t.notOk(listener.store.hasRun(runIdOf(1)))
  t.equal(listener.store.usage().total.runs, before.runs - 1)
  live.send({ type: 'ack', runId: runIdOf(2), fromSeq: 1, toSeq: 3 })
  t.match(await live.next('recorded'), { throughSeq: 3 }, 'the live run records on')
  ended.close()
  live.close()
})

t.test('runs of a campaign in progress are kept; once it is done they go', async (t) => {
  const dir = tempDir(t)
  await fill(dir, 3, 'c1')
  await sleep(1100)
  mkdirSync(join(dir, 'campaigns'), { recursive: true })
  const file = join(dir, 'campaigns', 'c1.json')
  const campaign = (phase: CampaignFile['phase']): string =>
    campaignFileText({
      version: 1,
      name: 'c1',
      cycles: 2,
      cutCommand: 'true',
      cutAfterS: [1, 2],
      rebootTimeoutS: 60,
      seed: 1,
      createdMs: Date.now(),
      phase,
      cycle: 2,
      history: [],
    })
  writeFileSync(file, campaign('waiting-for-agent'))
  const kept = await runInProcess(['runs', '--prune', '--older-than', '1s', '--dir', dir])
  t.match(kept.stdout, /^pruned 0 runs .*\(kept, though as old: 3 of a campaign in progress\)/)
  for (const damage of ['{"version": 1, "na', campaign('done').replace('"cycles": 2', '"cycles": 3')]) {
    writeFileSync(file, damage)
    const damaged = await runInProcess(['runs', '--prune', '--older-than', '1s', '--dir', dir])
    t.match(
      damaged.stdout,
      /^pruned 0 runs .*3 of a campaign in progress/,
      'a campaign file that cannot be read, or fails its checksum, keeps its runs',
    )
  }
  t.equal(runDirs(dir).length, 3)
  writeFileSync(file, campaign('done'))
  const gone = await runInProcess(['runs', '--prune', '--older-than', '1s', '--dir', dir])
  t.match(gone.stdout, /^pruned 3 runs/)
  t.equal(runDirs(dir).length, 0)

  // A campaign tag is whatever a writer sends: one with no campaign file here keeps nothing for ever.
  const strangers = tempDir(t)
  await fill(strangers, 2, 'made-up')
  await sleep(1100)
  const tagged = await runInProcess(['runs', '--prune', '--older-than', '1s', '--dir', strangers])
  t.match(tagged.stdout, /^pruned 2 runs/)
})

t.test('a prune killed with SIGKILL at random moments leaves every run whole or gone, never damage', async (t) => {
  const runs = 120
  let midPrune = 0
  for (let attempt = 0; attempt < 4 && midPrune === 0; attempt++) {
    const dir = tempDir(t)
    await fill(dir, runs)
    await sleep(1100)
    const child = spawnCli(['runs', '--prune', '--older-than', '1s', '--dir', dir])
    // Wait until the prune is under way (a first directory renamed), then kill at a random moment.
    await waitFor(
      'the prune under way',
      () => child.exitCode !== null || runDirs(dir).some((d) => d.startsWith('.pruned-')) || runDirs(dir).length < runs,
      30_000,
      1,
    )
    await sleep(Math.random() * 3)
    child.kill('SIGKILL')
    await new Promise((resolve) => child.once('exit', resolve))
    const left = runDirs(dir)
    const whole = left.filter((d) => !d.startsWith('.'))
    const renamed = left.length - whole.length
    if (renamed > 0 || (whole.length > 0 && whole.length < runs)) midPrune++
    t.comment(`attempt ${attempt}: killed with ${whole.length} runs whole and ${renamed} renamed for pruning`)
    // Replay (verify --acks reads it so) refuses damage: it must find each run left whole, with all its acks.
    const loaded = await AckStore.load(dir)
    t.same(loaded.warnings, [], `attempt ${attempt}: no warnings at replay`)
    const short = whole.filter((runId) => loaded.lastAckedSeq(runId) !== Number.parseInt(runId, 16))
    t.same(short, [], `attempt ${attempt}: each of the ${whole.length} runs left has all its acks`)
    t.equal(loaded.summaries().length, whole.length)
    // open() deletes what a killed prune had renamed; a second prune finishes the job.
    const again = await runInProcess(['runs', '--prune', '--older-than', '1s', '--dir', dir])
    t.equal(again.code, 0, again.stderr)
    t.same(runDirs(dir), [], `attempt ${attempt}: nothing left after a second prune, no .pruned- leftovers`)
  }
  t.ok(midPrune > 0, 'a kill landed mid-prune')
})

t.test('a run directory renamed for pruning is skipped at load and removed at open', async (t) => {
  const dir = tempDir(t)
  await fill(dir, 2)
  renameSync(join(dir, 'runs', runIdOf(1)), join(dir, 'runs', `.pruned-${runIdOf(1)}`))
  const loaded = await AckStore.load(dir)
  t.same(
    loaded.summaries().map((s) => s.runId),
    [runIdOf(2)],
  )
  t.ok(existsSync(join(dir, 'runs', `.pruned-${runIdOf(1)}`)), 'load (verify --acks) changes nothing')
  const opened = await AckStore.open(dir)
  await opened.close()
  t.same(runDirs(dir), [runIdOf(2)])
})

t.test('listen --retain prunes ended runs as it runs, never a live one, and says so', async (t) => {
  const dir = tempDir(t)
  const events = join(dir, 'events.jsonl')
  const listener = await startRetaining(join(dir, 'acks'), ['--retain', '2s', '--events', events])
  t.teardown(() => listener.kill())
  const ended = await Peer.writer(listener.port, runMeta(runIdOf(1)))
  ended.send({ type: 'end', runId: runIdOf(1), reason: 'duration' })
  await ended.next('recorded')
  ended.close()
  const liveSinceMs = Date.now()
  const live = await Peer.writer(listener.port, runMeta(runIdOf(2)))
  await waitFor('the ended run pruned', () => !existsSync(join(dir, 'acks', 'runs', runIdOf(1))), 20_000)
  const pruned = (): ListenerEvent[] =>
    (existsSync(events) ? readFileSync(events, 'utf8') : '')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ListenerEvent)
      .filter((e) => e.kind === 'pruned')
  await waitFor('the pruned event', () => pruned().length > 0)
  t.match(pruned(), [{ kind: 'pruned', runs: 1, olderThan: '2s' }])
  await waitFor('the stderr line', () => /pruned 1 run that ended over 2s ago \([\d,]+ bytes; --retain\)/.test(listener.stderr()))
  // Two passes that began once the live run was older than the age, as 2.5 s of 1 s ticks made sure.
  await sleep(Math.max(0, liveSinceMs + 2500 - Date.now()))
  await twoPassesFromNow(listener)
  t.ok(existsSync(join(dir, 'acks', 'runs', runIdOf(2))), 'the live run stays')
  live.send({ type: 'ack', runId: runIdOf(2), fromSeq: 1, toSeq: 2 })
  t.match(await live.next('recorded'), { throughSeq: 2 })
  live.close()
})

t.test(
  'a run that ended as vanished with no verdict is kept 7 days whatever the age; with a verdict it goes; a group goes whole',
  async (t) => {
    const dir = tempDir(t)
    const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir })
    t.teardown(() => listener.close())
    const port = listener.address().port
    const vanished = await Peer.writer(port, runMeta(runIdOf(1)))
    vanished.send({ type: 'ack', runId: runIdOf(1), fromSeq: 1, toSeq: 5 })
    await vanished.next('recorded')
    vanished.close() // the writer's machine cut: no end
    const group = runIdOf(0x77)
    const members = [runIdOf(2), runIdOf(3)]
    const writers = [await Peer.writer(port, runMeta(members[0]!, { groupId: group }))]
    writers.push(writers[0]!) // a group's runs come on one connection
    writers[0]!.send({ type: 'run', meta: runMeta(members[1]!, { groupId: group }) })
    await writers[0]!.next('run-ok')
    writers[0]!.send({ type: 'end', runId: members[0]!, reason: 'duration' })
    await writers[0]!.next('recorded')
    await waitFor('run 1 vanished', () => listener.store.summaries().find((s) => s.runId === runIdOf(1))?.end?.reason === 'vanished')
    const day = 86_400_000
    // As if the group's writer were gone: member 2 is kept for not having ended, member 1 with it.
    const isLive = (): boolean => false
    const sixDays = selectPrunable(listener.store, Date.now() + 6 * day, 1_000, isLive)
    t.same(sixDays.runIds, [], 'nothing: the vanished run is not judged, the group has a live member')
    t.same(sixDays.kept, { notEnded: 1, live: 0, campaign: 0, unjudged: 1, group: 1, unreadable: 0 })
    t.match(
      describeKept(sixDays.kept),
      /1 vanished \(a cut\?\) and not judged yet, kept 7 days.*1 of a group with a run kept \(a group is pruned whole\)/,
    )
    t.same(
      selectPrunable(listener.store, Date.now() + 8 * day, 1_000, isLive).runIds,
      [runIdOf(1)],
      'after 7 days an unjudged vanished run goes',
    )
    await listener.store.recordVerdict(
      runIdOf(1),
      verdictOf({ verdict: 'pass', acked: 5, intact: 5, lost: 0, lostRanges: [], lossWindowMs: null }),
    )
    await waitFor('the verdict write settled', () => 'bytes' in listener.store.pruneCandidate(runIdOf(1)))
    t.same(selectPrunable(listener.store, Date.now() + 2_000, 1_000, isLive).runIds, [runIdOf(1)], 'judged: it goes at the age given')
    writers[1]!.send({ type: 'end', runId: members[1]!, reason: 'duration' })
    await writers[1]!.next('recorded')
    writers[0]!.close()
    await waitFor('writers gone', () => members.every((id) => !listener.isLive(id)))
    const all = selectPrunable(listener.store, Date.now() + 3_000, 1_000, isLive)
    t.same(
      all.groups.map((g) => [...g].sort().join(' ')).sort(),
      [runIdOf(1), members.join(' ')].sort(),
      'the group whole, once every member may go',
    )
  },
)

t.test(
  'listen --retain prunes a group only whole: not while a member is too recent, then both; "1 run" said in the singular',
  async (t) => {
    const dir = tempDir(t)
    const listener = await startRetaining(dir, ['--retain', '6s'])
    t.teardown(() => listener.kill())
    const group = runIdOf(0x88)
    const members = [runIdOf(4), runIdOf(5)]
    const writer = await Peer.writer(listener.port, runMeta(members[0]!, { groupId: group }))
    writer.send({ type: 'run', meta: runMeta(members[1]!, { groupId: group }) })
    await writer.next('run-ok')
    // Member 1 ends, member 2 8 s later (jobs end on their own); checked when member 1 is past the
    // age by over a tick (1 s) and member 2 not yet: member 1 alone would have gone. Member 2 ends
    // 2 s after member 1 passed the age, so the passes checked have 6 s before member 2 passes it
    // too, however slow the machine (at 4 s apart they had 2 s, which a loaded machine missed).
    writer.send({ type: 'end', runId: members[0]!, reason: 'duration' })
    await writer.next('recorded')
    const firstEndedMs = Date.now() // member 1's end is stamped before this
    await sleep(8000)
    writer.send({ type: 'end', runId: members[1]!, reason: 'duration' })
    while (((await writer.next('recorded')) as { runId: string }).runId !== members[1]);
    writer.close()
    // Member 1 past the age by 0.5 s (over two 200 ms passes), then two whole passes from there.
    await sleep(Math.max(0, firstEndedMs + 6500 - Date.now()))
    await twoPassesFromNow(listener)
    t.ok(existsSync(join(dir, 'runs', members[0]!)), 'the older member is kept while the other is too recent')
    t.notMatch(listener.stderr(), /pruned/)
    await waitFor('the group pruned', () => /pruned 2 runs that ended over 6s ago/.test(listener.stderr()), 30_000)
    t.same(runDirs(dir), [], 'both members gone together')
    const single = await Peer.writer(listener.port, runMeta(runIdOf(6)))
    single.send({ type: 'end', runId: runIdOf(6), reason: 'duration' })
    await single.next('recorded')
    single.close()
    await waitFor('one run pruned', () => /pruned 1 run that ended over 6s ago/.test(listener.stderr()), 30_000)
  },
)

t.test('PLUGCHECK_TEST_RETAIN_TICK_MS other than a period from 100 ms to 1 h is refused before the listener starts', async (t) => {
  const dir = join(tempDir(t), 'acks')
  t.teardown(() => void delete process.env.PLUGCHECK_TEST_RETAIN_TICK_MS)
  for (const bad of ['99', '3600001', '1e3', '', ' 200', 'fast']) {
    process.env.PLUGCHECK_TEST_RETAIN_TICK_MS = bad
    const r = await runInProcess(['listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, '--retain', '2s'])
    t.equal(r.code, 2, `"${bad}" refused`)
    t.match(r.stderr, /PLUGCHECK_TEST_RETAIN_TICK_MS=.* is not a period in ms from 100 to 3600000 \(it is for tests only\)/)
    t.notOk(existsSync(dir), 'nothing opened')
  }
})

t.test('runs --prune --dry-run reads only: it works while a listener runs, and folds, locks or writes nothing', async (t) => {
  const dir = tempDir(t)
  await fill(dir, 2)
  const listener = await startListener(dir)
  t.teardown(() => listener.kill())
  const live = await Peer.writer(listener.port, runMeta(runIdOf(9)))
  live.send({ type: 'ack', runId: runIdOf(9), fromSeq: 1, toSeq: 3 })
  await live.next('recorded')
  // The live run is over 1 s old when the dry run looks at it (so it is one kept, though as old).
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const snapshot = (): string[] => {
    const out: string[] = []
    const walk = (d: string): void => {
      for (const name of readdirSync(d, { withFileTypes: true })) {
        const path = join(d, name.name)
        if (name.isDirectory()) walk(path)
        // The catalog is the listener's own to rewrite as it runs; the dry run writes none.
        else if (name.name !== 'catalog.msgpack') out.push(`${path} ${readFileSync(path).length}`)
      }
    }
    walk(dir)
    return out.sort()
  }
  const before = snapshot()
  const dry = await runInProcess(['runs', '--prune', '--older-than', '1s', '--dir', dir, '--dry-run'])
  t.equal(dry.code, 0, dry.stderr)
  t.match(dry.stdout, /^would prune 2 runs that ended over 1s ago/)
  t.same(
    dry.stdout
      .split('\n')
      .slice(1, -1)
      .map((l) => l.trim())
      .sort(),
    [runIdOf(1), runIdOf(2)],
    'the ended runs; the live one kept',
  )
  t.same(snapshot(), before, 'every file as it was (the journal not folded)')
  live.send({ type: 'ack', runId: runIdOf(9), fromSeq: 4, toSeq: 6 })
  t.match(await live.next('recorded'), { throughSeq: 6 }, 'the listener records on')
  live.close()
})
