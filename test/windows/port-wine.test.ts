// biome-ignore-all lint/suspicious/noExplicitAny: the probe's JSON, written by a program under Wine, is read as it comes and checked field by field
/**
 * The Windows port under Wine: real kernel32/ntdll/ws2_32 calls from the Windows node.exe, against real
 * files and real loopback sockets served from Linux. port-wine-probe.ts (bundled here with esbuild,
 * koffi left external) does the calls and reports JSON; this file judges it.
 *
 * Wine ignores FILE_FLAG_WRITE_THROUGH and FILE_FLAG_NO_BUFFERING and turns every flush into fsync:
 * this proves bindings, struct layouts, buffers and error paths, never durability.
 */
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect as tcpConnect } from 'node:net'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { cacheDir, repoRoot } from '../../scripts/wine.js'
import { ensureWine, runWineNode, winePath, wineRunTimeoutMs } from '../fixtures/wine.js'

type Outcome = { ok: boolean; value?: any; code?: string; message?: string; ms?: number }

async function bundleProbe(): Promise<string> {
  const { build } = await import('esbuild')
  // Inside node_modules, so node.exe finds koffi (and its Windows build) by walking up.
  const out = join(cacheDir, 'port-wine-probe.mjs')
  await build({
    entryPoints: [join(repoRoot, 'test', 'fixtures', 'port-wine-probe.ts')],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['koffi'],
    outfile: out,
    logLevel: 'error',
  })
  return out
}

const stuckListener = `
const server = require('node:net').createServer()
server.listen(0, '127.0.0.1', 1, () => {
  require('node:fs').writeSync(1, server.address().port + '\\n')
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0) // never accepts again
})
`

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, host, () => resolve((server.address() as { port: number }).port))
  })
}

t.test('the Windows port under Wine', async (t) => {
  ensureWine()
  const probe = await bundleProbe()
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-port-wine-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))

  // Echo server on both loopbacks: echoes until "bye", then closes.
  const sockets = new Set<Socket>()
  const echo = (socket: Socket) => {
    sockets.add(socket)
    socket.on('data', (data) => (data.toString().includes('bye') ? socket.end() : socket.write(data)))
    socket.on('error', () => {})
  }
  const echo4 = createServer(echo)
  const echoPort = await listen(echo4, '127.0.0.1')
  // The same port on ::1, for the IPv6 connect.
  const echo6 = createServer(echo)
  await new Promise<void>((resolve, reject) => {
    echo6.once('error', reject)
    echo6.listen(echoPort, '::1', () => resolve())
  })
  // A server that accepts and never answers.
  const silent = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
  })
  const silentPort = await listen(silent, '127.0.0.1')
  // A port with nobody listening: bind one, note it, close it.
  const closed = createServer()
  const refusedPort = await listen(closed, '127.0.0.1')
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    echo4.close()
    echo6.close()
    silent.close()
  })

  // A listener that never accepts (its event loop is blocked), its accept queue filled: SYNs to it are dropped.
  const stuck = spawn(process.execPath, ['-e', stuckListener], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => stuck.kill('SIGKILL'))
  const stuckPort = await new Promise<number>((resolve, reject) => {
    stuck.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))
    stuck.once('exit', (code) => reject(new Error(`stuck listener exited ${code}`)))
  })
  const fillers: Socket[] = []
  for (let i = 0; i < 4; i++) fillers.push(tcpConnect(stuckPort, '127.0.0.1').on('error', () => {}))
  t.teardown(() =>
    fillers.forEach((s) => {
      s.destroy()
    }),
  )
  await new Promise((resolve) => setTimeout(resolve, 200))

  // Read-only: FILE_ATTRIBUTE_READONLY is the unix mode under Wine, which root ignores; an immutable
  // file (chattr +i) makes root's open fail too, so Wine reports ERROR_ACCESS_DENIED either way.
  const readOnly = join(dir, 'read-only')
  writeFileSync(readOnly, 'x')
  chmodSync(readOnly, 0o444)
  if (process.getuid?.() === 0) {
    const chattr = spawnSync('chattr', ['+i', readOnly], { encoding: 'utf8' })
    t.equal(chattr.status, 0, `chattr +i for the read-only case as root: ${chattr.stderr ?? chattr.error}`)
    t.teardown(() => spawnSync('chattr', ['-i', readOnly]))
  }

  const resultPath = join(dir, 'result.json')
  const run = await runWineNode(
    [
      winePath(probe),
      'run',
      winePath(resultPath),
      winePath(dir),
      String(echoPort),
      String(refusedPort),
      String(silentPort),
      String(stuckPort),
    ],
    {
      timeoutMs: wineRunTimeoutMs,
    },
  )
  t.equal(run.code, 0, `probe exits 0 under Wine\n${run.stderr}`)
  if (run.code !== 0) return
  const r = JSON.parse(readFileSync(resultPath, 'utf8')) as Record<string, any>

  t.test('table: Wine 8 lacks NtFlushBuffersFileEx, and the note says durability is not tested', async (t) => {
    t.equal(r.probe.ntFlushBuffersFileEx, false)
    t.type(r.probe.wineVersion, 'string')
    const fdatasync = r.table.methods.find((m: any) => m.name === 'fdatasync')
    t.equal(fdatasync.available, false)
    t.match(fdatasync.reason, /NtFlushBuffersFileEx/)
    t.match(r.table.notes.join('\n'), /Wine .*durability is not tested/)
  })

  t.test('each available method writes, syncs and reads back, plain and --direct', async (t) => {
    const available = r.table.methods.filter((m: any) => m.available).map((m: any) => m.name)
    t.same(available.sort(), ['fsync', 'fsync_writethrough', 'none', 'open_datasync'])
    for (const name of available) {
      t.same(r.methods[name].plain, { ok: true, value: true, ms: r.methods[name].plain.ms }, `${name} unaligned`)
      t.same(r.methods[name].direct, { ok: true, value: true, ms: r.methods[name].direct.ms }, `${name} aligned --direct`)
    }
    for (const name of ['open_sync', 'barrier_fsync', 'pwritev2_dsync', 'fdatasync', 'flush_data_only']) {
      t.equal(r.methods[name].open.ok, false, `${name} refuses to open`)
    }
    t.equal(r.alignedAddressOk.value, true)
    // Wine does not check NO_BUFFERING alignment (Windows returns ERROR_INVALID_PARAMETER): either is accepted here.
    t.ok(r.misalignedDirect.ok || r.misalignedDirect.code === 'EINVAL', JSON.stringify(r.misalignedDirect))
    t.equal(r.probeDirect.ok, true, JSON.stringify(r.probeDirect))
    t.equal(r.probeDirectAgain.code, 'EEXIST', 'probeDirect creates a new file only')
    t.match(r.probeDirectAgain.message, /: Windows error 80, CreateFileW/)
  })

  t.test("a files run's calls per method: create, publish by MoveFileExW or a hard link, delete; the errors", async (t) => {
    const available = r.table.methods.filter((m: any) => m.available).map((m: any) => m.name)
    const { direct, ...byMethod } = r.recordDirectories
    t.same(Object.keys(byMethod).sort(), available.sort(), 'every available method')
    t.same(direct, { ok: true, value: true, ms: direct.ms }, '--direct: a record file made with FILE_FLAG_NO_BUFFERING')
    for (const name of available) {
      const made = r.recordDirectories[name]
      t.equal(made.ok, true, `${name}: ${made.message ?? ''}`)
      if (!made.ok) continue
      t.same(made.value.names, ['rec-1', 'rec-4'], `${name}: the published names alone (rec-2 deleted, no temporary name)`)
      t.equal(made.value.rec1, true, `${name}: rec-1 replaced by the later file`)
      t.equal(made.value.rec4, true, `${name}: rec-4's bytes`)
      const e = made.value.errors
      t.match(e.createExisting, { ok: false, code: 'EEXIST' }, `${name}: CREATE_NEW on an existing name`)
      t.match(e.unlinkMissing, { ok: false, code: 'ENOENT' }, `${name}: DeleteFileW of a missing name`)
      t.match(e.linkOntoExisting, { ok: false, code: 'EEXIST' }, `${name}: CreateHardLinkW onto an existing name`)
      t.match(e.renameMissing, { ok: false, code: 'ENOENT' }, `${name}: MoveFileExW of a missing name`)
    }
  })

  t.test('errors: one line, a POSIX code and the Windows error number', async (t) => {
    const oneLine = (o: Outcome, what: string) => t.notMatch(o.message ?? '', /\n/, `${what}: one line`)
    t.equal(r.readOnly.code, 'EPERM', `ERROR_ACCESS_DENIED is EPERM, as Node reports it on Windows: ${JSON.stringify(r.readOnly)}`)
    t.match(r.readOnly.message, /^EPERM: access (is )?denied: Windows error 5, CreateFileW 'Z:\\.*read-only'$/)
    oneLine(r.readOnly, 'read-only')
    t.equal(r.missingFolder.code, 'ENOENT')
    t.match(r.missingFolder.message, /^ENOENT: .*: Windows error 3, CreateFileW 'Z:\\.*no-such-folder\\data'$/)
    oneLine(r.missingFolder, 'missing folder')
    t.equal(r.directory.ok, false)
    t.ok(['EISDIR', 'EPERM', 'EACCES'].includes(r.directory.code), `directory: ${JSON.stringify(r.directory)}`)
    t.match(r.directory.message, /: Windows error \d+, CreateFileW/)
    oneLine(r.directory, 'directory')
    t.equal(r.unavailable.ok, false, 'open_sync is refused before any call')
  })

  t.test('locks: busy from a second handle and a second process, the data stays writable', async (t) => {
    t.equal(r.lockMissing.value, 'missing')
    t.same(r.lockIdentity.lock, r.lockIdentity.node, "the lock's dev/ino are Node's statSync dev/ino")
    t.equal(r.lockSecondHandle.value, 'busy')
    t.equal(r.lockOtherProcess.stdout, 'busy', JSON.stringify(r.lockOtherProcess))
    t.equal(r.lockedFileWritable.value, 'still writable', 'the lock byte is far past the data')
    t.equal(r.lockAfterRelease.value, 'locked')
  })

  t.test('file system, boot id, cache, directory sync', async (t) => {
    t.equal(r.fileSystem.ok, true, JSON.stringify(r.fileSystem))
    t.type(r.fileSystem.value?.type, 'string')
    t.equal(r.fileSystem.value?.inMemory, false)
    t.equal(r.fileSystemMissing.code, 'ENOENT')
    t.equal(r.bootId.ok, true)
    t.ok(r.bootId.value === null || /^\d+$/.test(r.bootId.value), `bootId ${r.bootId.value}`)
    t.equal(r.dropCache, false)
    t.equal(r.directorySync.supported, false)
    t.match(r.directorySync.reason, /NTFS journals the rename/)
  })

  t.test('Winsock: exchange bytes, refused, bounded waits', async (t) => {
    t.same(r.echo.value, { idle: 0, echoed: 'ping over winsock', closed: -1 }, JSON.stringify(r.echo))
    t.equal(r.mapped.ok, true, `::ffff:127.0.0.1 connects as IPv4: ${JSON.stringify(r.mapped)}`)
    t.equal(r.ipv6.ok, true, `::1: ${JSON.stringify(r.ipv6)}`)
    t.equal(r.refused.code, 'ECONNREFUSED', JSON.stringify(r.refused))
    t.match(r.refused.message, /^ECONNREFUSED: .*: Windows error 10061, connect '127\.0\.0\.1:\d+'$/)
    t.equal(r.silent.value?.n, 0, 'a quiet peer: recvWait returns 0')
    t.ok(
      r.silent.value?.waitedMs >= 600 && r.silent.value?.waitedMs < 5000,
      `recvWait waited ${r.silent.value?.waitedMs} ms for a 700 ms bound`,
    )
    t.equal(r.connectTimeout.ok, false)
    t.equal(r.connectTimeout.code, 'ETIMEDOUT', JSON.stringify(r.connectTimeout))
    t.ok(r.connectTimeout.ms >= 600 && r.connectTimeout.ms < 5000, `connect gave up after ${r.connectTimeout.ms} ms for a 700 ms bound`)
  })
})
