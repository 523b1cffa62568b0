/**
 * Runs under Wine (node.exe), bundled by port-wine.test.ts: drives the Windows port through real
 * kernel32/ntdll/ws2_32 calls and writes what happened as JSON for the test to judge on Linux.
 *
 *   probe.mjs run <result.json> <work dir (Windows path)> <echo port> <refused port> <silent port> <stuck port>
 *   probe.mjs try-lock <lock file>   (prints busy / locked / missing)
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { methodNames, type MethodName } from '../../src/native/methods.js'
import { probe, windowsPort as port } from '../../src/native/windows/index.js'

type Outcome = { ok: true; value?: unknown; ms?: number } | { ok: false; code?: string; message: string; ms?: number }

function attempt(fn: () => unknown): Outcome {
  const started = Date.now()
  try {
    const value = fn()
    return { ok: true, value, ms: Date.now() - started }
  } catch (error) {
    const e = error as { code?: string; message?: string }
    return { ok: false, code: e.code, message: String(e.message), ms: Date.now() - started }
  }
}

function pattern(length: number, seed: number): Buffer {
  const buf = Buffer.alloc(length)
  for (let i = 0; i < length; i++) buf[i] = (i * 31 + seed) & 0xff
  return buf
}

function main(argv: string[]): void {
  const [mode, ...rest] = argv
  if (mode === 'try-lock') {
    const lock = port.lockExclusive(rest[0], false)
    process.stdout.write(typeof lock === 'string' ? lock : 'locked')
    if (typeof lock !== 'string') lock.release()
    return
  }
  const [resultPath, dir, echoPort, refusedPort, silentPort, stuckPort] = rest
  const out: Record<string, unknown> = {}
  out.probe = probe()
  out.table = port.table()

  // Each available method: an unaligned write and an aligned --direct write, synced, read back.
  const dataPath = join(dir, 'data')
  writeFileSync(dataPath, Buffer.alloc(1 << 20))
  const methods: Record<string, unknown> = {}
  const available = new Set(port.table().methods.filter((m) => m.available).map((m) => m.name))
  for (const name of methodNames) {
    if (!available.has(name)) {
      methods[name] = { available: false, open: attempt(() => port.openData(dataPath, name as MethodName, { direct: false })) }
      continue
    }
    const seed = methodNames.indexOf(name) + 1
    const unaligned = pattern(1000, seed)
    const plain = attempt(() => {
      const file = port.openData(dataPath, name, { direct: false })
      file.write(unaligned, 13 + seed * 4096)
      file.sync()
      file.close()
      return readFileSync(dataPath).subarray(13 + seed * 4096, 13 + seed * 4096 + 1000).equals(unaligned)
    })
    const aligned = port.alignedBuffer(8192, 4096)
    pattern(8192, seed + 100).copy(aligned)
    const direct = attempt(() => {
      const file = port.openData(dataPath, name, { direct: true })
      file.write(aligned, 65536 + seed * 8192)
      file.sync()
      file.close()
      return readFileSync(dataPath).subarray(65536 + seed * 8192, 65536 + seed * 8192 + 8192).equals(aligned)
    })
    methods[name] = { available: true, plain, direct }
  }
  out.methods = methods
  out.alignedAddressOk = attempt(() => {
    const b = port.alignedBuffer(4096, 4096)
    return b.length === 4096 && b.every((x) => x === 0)
  })
  out.misalignedDirect = attempt(() => {
    const file = port.openData(dataPath, 'fsync', { direct: true })
    try {
      file.write(pattern(100, 7), 3)
    } finally {
      file.close()
    }
    return true
  })
  out.probeDirect = attempt(() => port.probeDirect(join(dir, 'direct-probe')))
  out.probeDirectAgain = attempt(() => port.probeDirect(join(dir, 'direct-probe')))

  // Errors.
  const readOnly = join(dir, 'read-only') // made read-only by the test on the Linux side
  out.readOnly = attempt(() => port.openData(readOnly, 'fsync', { direct: false }))
  out.missingFolder = attempt(() => port.openData(join(dir, 'no-such-folder', 'data'), 'fsync', { direct: false }))
  out.directory = attempt(() => port.openData(dir, 'fsync', { direct: false }))
  out.unavailable = attempt(() => port.openData(dataPath, 'open_sync', { direct: false }))

  // Locks.
  const lockPath = join(dir, 'lock')
  out.lockMissing = attempt(() => port.lockExclusive(lockPath, false))
  const lock = port.lockExclusive(lockPath, true)
  if (typeof lock === 'string') throw new Error(`first lock: ${lock}`)
  const stat = statSync(lockPath)
  out.lockIdentity = { lock: { dev: lock.dev, ino: lock.ino }, node: { dev: stat.dev, ino: stat.ino } }
  out.lockSecondHandle = attempt(() => port.lockExclusive(lockPath, false))
  const child = spawnSync(process.execPath, [process.argv[1], 'try-lock', lockPath], { encoding: 'utf8', timeout: 60_000 })
  out.lockOtherProcess = { status: child.status, stdout: child.stdout, stderr: child.stderr }
  out.lockedFileWritable = attempt(() => {
    const file = port.openData(lockPath, 'fsync', { direct: false })
    file.write(Buffer.from('still writable'), 0)
    file.sync()
    file.close()
    return readFileSync(lockPath, 'utf8')
  })
  lock.release()
  out.lockAfterRelease = attempt(() => {
    const again = port.lockExclusive(lockPath, false)
    if (typeof again !== 'string') again.release()
    return typeof again === 'string' ? again : 'locked'
  })

  out.fileSystem = attempt(() => port.fileSystemOf(dir))
  out.fileSystemMissing = attempt(() => port.fileSystemOf(join(dir, 'nope')))
  out.bootId = attempt(() => port.bootId())
  out.dropCache = port.dropCache(dataPath)
  out.directorySync = port.directorySync

  // Sockets.
  const address = (text: string, family: 4 | 6, p: string) => ({ address: text, family, port: Number(p), scopeId: 0 })
  out.echo = attempt(() => {
    const s = port.connect(address('127.0.0.1', 4, echoPort), 5000, `127.0.0.1:${echoPort}`)
    try {
      const idle = s.recvNow(Buffer.alloc(16))
      s.sendAll(Buffer.from('ping over winsock'))
      const got: Buffer[] = []
      let total = 0
      while (total < 17 && s.waitReadable(5000)) {
        const buf = Buffer.alloc(64)
        const n = s.recvNow(buf)
        if (n <= 0) break
        got.push(buf.subarray(0, n))
        total += n
      }
      const echoed = Buffer.concat(got).toString()
      s.sendAll(Buffer.from('bye'))
      // The server closes after "bye": the peer's close is -1.
      let closed = 0
      for (let i = 0; i < 50 && closed === 0; i++) closed = s.recvWait(Buffer.alloc(64))
      return { idle, echoed, closed }
    } finally {
      s.close()
    }
  })
  out.mapped = attempt(() => {
    const s = port.connect(address('::ffff:127.0.0.1', 6, echoPort), 5000, 'mapped')
    s.close()
    return true
  })
  out.ipv6 = attempt(() => {
    const s = port.connect(address('::1', 6, echoPort), 5000, `[::1]:${echoPort}`)
    s.close()
    return true
  })
  out.refused = attempt(() => port.connect(address('127.0.0.1', 4, refusedPort), 5000, `127.0.0.1:${refusedPort}`).close())
  out.silent = attempt(() => {
    const s = port.connect(address('127.0.0.1', 4, silentPort), 700, `127.0.0.1:${silentPort}`)
    try {
      const started = Date.now()
      const n = s.recvWait(Buffer.alloc(16))
      return { n, waitedMs: Date.now() - started }
    } finally {
      s.close()
    }
  })
  // A listener whose accept queue is full drops our SYN: the connect must give up at the bound.
  out.connectTimeout = attempt(() => port.connect(address('127.0.0.1', 4, stuckPort), 700, `127.0.0.1:${stuckPort}`).close())

  mkdirSync(dir, { recursive: true })
  writeFileSync(resultPath, JSON.stringify(out, null, 1))
}

main(process.argv.slice(2))
