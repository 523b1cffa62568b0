/**
 * The listener's events, through the real `plugcheck listen` and real writers: one line each on stderr
 * and, with --events FILE, one whole JSON line each. A writer killed with SIGKILL is a vanished event
 * naming the verify command to run after the reboot (the listener's address as the writer reached it);
 * an ack directory in memory is a warning at start; a failing events file is a warning, never the end.
 */
import t from 'tap'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { describeEvent, type ListenerEvent } from '../../../../src/server/listen/events.js'
import { protocolVersion } from '../../../../src/protocol/messages.js'
import { runCli, startListener, tempDir, waitFor, writeThenKill } from '../../../fixtures/cli.js'
import { bulkyFingerprint, Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'
import { verdictOf } from '../../../fixtures/verdict-fixture.js'

function eventsIn(path: string): ListenerEvent[] {
  if (!existsSync(path)) return []
  const text = readFileSync(path, 'utf8')
  if (text !== '' && !text.endsWith('\n')) throw new Error(`the events file ends in the middle of a line: ${text.slice(-200)}`)
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as ListenerEvent)
}

t.test('a writer killed with SIGKILL: run, vanished with the verify command, on stderr and as JSON lines', async (t) => {
  const dir = tempDir(t)
  const eventsFile = join(dir, 'events.jsonl')
  const listener = await startListener(join(dir, 'acks'), ['--events', eventsFile])
  t.teardown(() => listener.kill())
  const file = join(dir, 'data file')
  const synced = await writeThenKill(listener.server, file, ['--method', 'fdatasync'], 50)
  t.ok(synced >= 50)

  await waitFor('a vanished event', () => eventsIn(eventsFile).some((e) => e.kind === 'vanished'))
  const events = eventsIn(eventsFile)
  const kinds = events.map((e) => e.kind)
  // The writer's connection, then its question about the path's last run (a write never destroys an unverified run's evidence), then its run.
  t.same(kinds.slice(0, 3), ['connection', 'connection', 'run'], `in order: ${kinds.join(', ')}`)
  const run = events.find((e) => e.kind === 'run') as Extract<ListenerEvent, { kind: 'run' }>
  t.match(run, { method: 'fdatasync', path: file, peer: '127.0.0.1', campaign: null })
  const vanished = events.find((e) => e.kind === 'vanished') as Extract<ListenerEvent, { kind: 'vanished' }>
  t.equal(vanished.runId, run.runId)
  t.ok(vanished.acked > 0, `${vanished.acked} acks`)
  const command = `plugcheck verify --server 127.0.0.1:${listener.port} --file '${file}'`
  t.equal(vanished.verifyCommand, command, 'the verify command: the listener as the writer reached it, the path quoted')

  // stderr comes through a pipe: the line may arrive a moment after the events file has it.
  await waitFor('the vanished line on stderr', () => listener.stderr().includes('vanished'))
  const stderr = listener.stderr()
  t.match(stderr, /^\d\d:\d\d:\d\d connection from 127\.0\.0\.1$/m)
  t.match(
    stderr,
    new RegExp(`^\\d\\d:\\d\\d:\\d\\d run ${run.runId} announced by [^ ]+:${file} \\(fdatasync\\) from 127\\.0\\.0\\.1$`, 'm'),
  )
  const line = stderr.split('\n').find((l) => l.includes('vanished'))!
  t.match(
    line,
    new RegExp(`writer on [^ ]+ vanished after [\\d,]+ acks at \\d\\d:\\d\\d:\\d\\d \\(run ${run.runId}, .*\\): after the reboot run \``),
  )
  t.ok(line.endsWith(`\`${command}\``), line)

  // The command pastes back: verify judges the run the writer left (no power cut here, so whatever it finds, not "no run").
  const verify = await runCli(['verify', '--server', `127.0.0.1:${listener.port}`, '--file', file, '--json'])
  t.not(verify.code, 2, `verify found the run (${verify.stderr})`)

  // A writer that ends on its own: an end event with its reason and duration; a verdict: a verdict event.
  const ended = runIdOf(0x501)
  const writer = await Peer.open(listener.port)
  writer.send({ type: 'hello', protocol: protocolVersion, role: 'writer' })
  writer.send({ type: 'run', meta: runMeta(ended), campaign: { name: 'c1', cycle: 1 } })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId: ended, fromSeq: 1, toSeq: 5 })
  await writer.next('recorded')
  writer.send({ type: 'steady', runId: ended })
  writer.send({ type: 'end', runId: ended, reason: 'duration' })
  await writer.next('recorded')
  const verifier = await Peer.open(listener.port)
  verifier.send({ type: 'hello', protocol: protocolVersion, role: 'verifier' })
  verifier.send({ type: 'verdict', runId: ended, result: verdictOf() })
  await verifier.next('verdict-ok')
  writer.close()
  verifier.close()
  await waitFor('the verdict event', () => eventsIn(eventsFile).some((e) => e.kind === 'verdict' && 'runId' in e && e.runId === ended))
  const later = eventsIn(eventsFile).filter((e) => 'runId' in e && e.runId === ended)
  t.same(
    later.map((e) => e.kind),
    ['run', 'steady', 'end', 'verdict'],
    'no vanished event for a run that ended',
  )
  t.match(later[1], { kind: 'steady', acked: 5, campaign: { name: 'c1', cycle: 1 } })
  t.match(later[2], { kind: 'end', reason: 'duration', acked: 5 })
  t.type((later[2] as { durationMs: number }).durationMs, 'number')
  t.match(later[3], { kind: 'verdict', result: { verdict: 'fail', lost: 2 }, campaign: { name: 'c1', cycle: 1 } })
  // As above: the events file has the verdict; its stderr line may still be in the pipe.
  await waitFor('the verdict line on stderr', () => listener.stderr().includes(`verdict for run ${ended}`))
  t.match(
    listener.stderr(),
    new RegExp(`run ${ended} on testhost:/data/${ended} is steady after 5 acks: the moment to cut \\[campaign c1, cycle 1\\]`),
  )
  t.match(listener.stderr(), new RegExp(`run ${ended} on testhost:/data/${ended} ended \\(duration\\) after [\\d.]+ s, 5 acks`))
  t.match(listener.stderr(), new RegExp(`verdict for run ${ended} on testhost:/data/${ended}: fail, 5 acked, 2 lost, 0 torn, 0 corrupt`))

  // SIGTERM: the listener's own shutdown is not a writer vanishing.
  const live = await Peer.writer(listener.port, runMeta(runIdOf(0x502)))
  await listener.kill('SIGTERM')
  live.close()
  t.notOk(
    eventsIn(eventsFile).some((e) => e.kind === 'vanished' && e.runId === runIdOf(0x502)),
    'no vanished event at shutdown',
  )
})

t.test('a Windows writer vanished: the verify command gives its path with forward slashes, which a POSIX shell keeps', async (t) => {
  const dir = tempDir(t)
  const eventsFile = join(dir, 'events.jsonl')
  const listener = await startListener(join(dir, 'acks'), ['--events', eventsFile])
  t.teardown(() => listener.kill())
  const runId = runIdOf(0x601)
  const path = 'Z:\\data\\my dir\\p.dat'
  const windowsFingerprint = { ...bulkyFingerprint, os: { ...bulkyFingerprint.os, platform: 'win32', kernel: 'Windows_NT' } }
  const writer = await Peer.open(listener.port)
  writer.send({ type: 'hello', protocol: protocolVersion, role: 'writer' })
  writer.send({
    type: 'run',
    meta: runMeta(runId, { path, requestedPath: path }),
    writer: {
      bootId: null,
      fingerprint: {
        ...windowsFingerprint,
        target: { ...bulkyFingerprint.target, fileSystem: { ...bulkyFingerprint.target.fileSystem, type: 'ntfs', mountOptions: [] } },
      },
    },
  })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 3 })
  await writer.next('recorded')
  writer.close()
  await waitFor('a vanished event', () => eventsIn(eventsFile).some((e) => e.kind === 'vanished'))
  const vanished = eventsIn(eventsFile).find((e) => e.kind === 'vanished') as Extract<ListenerEvent, { kind: 'vanished' }>
  t.equal(vanished.path, path, 'the path as the writer gave it')
  t.equal(vanished.verifyCommand, `plugcheck verify --server 127.0.0.1:${listener.port} --file 'Z:/data/my dir/p.dat'`)
})

t.test('an ack directory on tmpfs is a warning at start, on stderr and in the events file', async (t) => {
  // /dev/shm is a tmpfs on every Linux system the suite runs on (glibc's shm_open keeps its objects there).
  const dir = tempDir(t)
  const shm = mkdtempSync('/dev/shm/plugcheck-test-')
  t.teardown(() => rmSync(shm, { recursive: true, force: true }))
  const eventsFile = join(dir, 'events.jsonl')
  const listener = await startListener(shm, ['--events', eventsFile])
  t.teardown(() => listener.kill())
  t.match(
    listener.stderr(),
    /^\d\d:\d\d:\d\d warning: the ack directory \/dev\/shm\/plugcheck-test-\w+ is on a file system in memory \(tmpfs or ramfs\)/m,
  )
  // The events file is appended asynchronously: the line lands a moment after stderr's.
  await waitFor('the warning in the events file', () => eventsIn(eventsFile).length > 0)
  t.match(eventsIn(eventsFile), [{ kind: 'warning', message: /in memory/ }])

  const disk = await startListener(join(dir, 'acks'))
  t.teardown(() => disk.kill())
  t.notMatch(disk.stderr(), /in memory/, 'no warning for a directory on disk')
})

t.test('an events file that cannot be written is a warning; the listener goes on serving', async (t) => {
  const dir = tempDir(t)
  const eventsFile = join(dir, 'a directory')
  mkdirSync(eventsFile)
  const listener = await startListener(join(dir, 'acks'), ['--events', eventsFile])
  t.teardown(() => listener.kill())
  for (let i = 0; i < 3; i++) (await Peer.writer(listener.port, runMeta(runIdOf(0x600 + i)))).close()
  await waitFor(
    'three runs announced',
    () =>
      listener
        .stderr()
        .split('\n')
        .filter((l) => / run \w+ announced/.test(l)).length === 3,
  )
  const warnings = listener
    .stderr()
    .split('\n')
    .filter((l) => l.includes('could not append to the events file'))
  t.equal(warnings.length, 1, `said once while it keeps failing: ${warnings[0]}`)
  t.match(warnings[0], /^plugcheck: warning: could not append to the events file .*a directory: EISDIR/)
  const runs = await runCli(['runs', '--server', listener.server, '--json'])
  t.equal(runs.code, 0, runs.stderr)
  t.equal((JSON.parse(runs.stdout) as { runs: unknown[] }).runs.length, 3, 'the listener still serves')
})

t.test('describeEvent: one readable line, control characters from the network made harmless', async (t) => {
  const atMs = new Date(2026, 0, 2, 12, 0, 1).getTime()
  const base = { runId: '0123456789abcdef', groupId: '0123456789abcdef', host: 'db2', path: '/mnt/test/p.dat' }
  t.equal(
    describeEvent({ kind: 'run', ...base, method: 'fdatasync', peer: '10.0.0.7', campaign: null, atMs }),
    '12:00:01 run 0123456789abcdef announced by db2:/mnt/test/p.dat (fdatasync) from 10.0.0.7',
  )
  t.equal(
    describeEvent({
      kind: 'vanished',
      ...base,
      acked: 12345,
      atMs,
      verifyCommand: 'plugcheck verify --server 10.0.0.1:5400 --file /mnt/test/p.dat',
    }),
    '12:00:01 writer on db2 vanished after 12,345 acks at 12:00:01 (run 0123456789abcdef, /mnt/test/p.dat): after the reboot run `plugcheck verify --server 10.0.0.1:5400 --file /mnt/test/p.dat`',
  )
  t.equal(
    describeEvent({ kind: 'end', ...base, reason: 'error', detail: 'EIO', acked: 7, durationMs: 3_723_000, atMs }),
    '12:00:01 run 0123456789abcdef on db2:/mnt/test/p.dat ended (error: EIO) after 1 h 2 min, 7 acks',
  )
  t.equal(
    describeEvent({ kind: 'campaign', name: 'ssd-a', message: 'cycle 2 of 5: cutting', atMs }),
    '12:00:01 campaign ssd-a: cycle 2 of 5: cutting',
  )
  t.notMatch(describeEvent({ kind: 'connection', peer: 'x\n12:00:00 forged line\u001b[2J', atMs }), /[\n\u001b]/)
})
