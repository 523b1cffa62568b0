/**
 * A Windows writer of `C:\Users\O'Brien\data\p.dat` vanishes; the listener's verify command gives
 * `--file 'C:/Users/O''Brien/data/p.dat'` (PowerShell's doubled quote). README (Windows under Wine):
 * the printed verify command "is written for PowerShell and a POSIX shell alike" (bash driving Wine,
 * Git Bash, an ssh session). Pasted into /bin/sh, '' closes and reopens the quotes: the path becomes
 * C:/Users/OBrien/data/p.dat, another file. U+2019 (’, which PowerShell also doubles) becomes ’’.
 * Must: the command pasted into a POSIX shell hands verify exactly the path (forward slashes).
 * The shell here runs nothing: plugcheck is a shell function that prints its arguments.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ListenerEvent } from '../../src/server/listen/events.js'
import { protocolVersion } from '../../src/protocol/messages.js'
import { startListener, tempDir, waitFor } from '../fixtures/cli.js'
import { bulkyFingerprint, Peer, runIdOf, runMeta } from '../fixtures/peer.js'

function eventsIn(path: string): ListenerEvent[] {
  if (!existsSync(path)) return []
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as ListenerEvent)
}

/** The arguments /bin/sh hands to plugcheck when the command is pasted (nothing is run). */
function argsOfPaste(command: string): string[] {
  const out = execFileSync('/bin/sh', ['-c', `plugcheck() { printf '%s\\0' "$@"; }\n${command}`]).toString()
  return out.split('\0').slice(0, -1)
}

t.test('a Windows path with an apostrophe: the printed verify command pasted into sh gives back the path', async (t) => {
  const dir = tempDir(t)
  const eventsFile = join(dir, 'events.jsonl')
  const listener = await startListener(join(dir, 'acks'), ['--events', eventsFile])
  t.teardown(() => listener.kill())
  const windowsFingerprint = {
    ...bulkyFingerprint,
    os: { ...bulkyFingerprint.os, platform: 'win32', kernel: 'Windows_NT' },
    target: { ...bulkyFingerprint.target, fileSystem: { ...bulkyFingerprint.target.fileSystem, type: 'ntfs', mountOptions: [] } },
  }
  const paths = ["C:\\Users\\O'Brien\\data\\p.dat", 'C:\\Users\\O\u2019Brien\\data\\p.dat']
  for (const [i, path] of paths.entries()) {
    const runId = runIdOf(0x7a0 + i)
    const writer = await Peer.open(listener.port)
    writer.send({ type: 'hello', protocol: protocolVersion, role: 'writer' })
    writer.send({
      type: 'run',
      meta: runMeta(runId, { path, requestedPath: path }),
      writer: { bootId: null, fingerprint: windowsFingerprint },
    })
    await writer.next('run-ok')
    writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: 3 })
    await writer.next('recorded')
    writer.close()
    await waitFor(`the vanished event of ${path}`, () => eventsIn(eventsFile).some((e) => e.kind === 'vanished' && e.runId === runId))
    const vanished = eventsIn(eventsFile).find((e) => e.kind === 'vanished' && e.runId === runId) as Extract<
      ListenerEvent,
      { kind: 'vanished' }
    >
    const args = argsOfPaste(vanished.verifyCommand)
    const file = args[args.indexOf('--file') + 1]
    t.equal(file, path.replace(/\\/g, '/'), `${vanished.verifyCommand}: sh hands verify the path`)
  }
})
