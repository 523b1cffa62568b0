/**
 * The win-x64 single executable (npm run build:exe) under Wine, against a Linux listener on
 * 127.0.0.1: its method table, and a 2 s write and its verify. Under Wine the executable unpacks into
 * the Wine prefix's %LOCALAPPDATA%\plugcheck (Wine sets that variable itself).
 */
import { join } from 'node:path'
import t from 'tap'
import { startListener, tempDir } from '../fixtures/cli.js'
import { ensureWine, runWineNode, winePath, wineRunTimeoutMs } from '../fixtures/wine.js'
import { builtExe } from '../fixtures/exe.js'

t.test('the win-x64 single executable (under Wine)', async (t) => {
  ensureWine()
  const exe = await builtExe('win-x64')
  const dir = tempDir(t, 'plugcheck-exe-win-')
  const run = (args: string[]) => runWineNode(args, { program: exe, cwd: dir, timeoutMs: wineRunTimeoutMs })

  t.test('methods: the Windows table', async (t) => {
    const result = await run(['methods', '--json'])
    t.equal(result.code, 0, result.stderr)
    const report = JSON.parse(result.stdout)
    t.equal(report.platform, 'win32')
    t.match(report.methods.find((m: { name: string }) => m.name === 'fsync').calls, /FlushFileBuffers/)
  })

  t.test('a 2 s write and its verify against a Linux listener', async (t) => {
    const listener = await startListener(join(dir, 'acks'))
    t.teardown(() => listener.kill())
    const file = join(dir, 'data.plugcheck')
    const write = await run(['write', '--server', listener.server, '--file', winePath(file), '--method', 'fsync', '--duration', '2'])
    t.equal(write.code, 0, write.stderr)
    const verify = await run(['verify', '--server', listener.server, '--file', winePath(file), '--json'])
    t.equal(verify.code, 0, verify.stderr)
    const report = JSON.parse(verify.stdout)
    t.equal(report.runs.length, 1)
    const [fsync] = report.runs
    t.equal(fsync.method, 'fsync')
    t.ok(fsync.acked > 0, `${fsync.acked} records acknowledged`)
    t.equal(fsync.intact, fsync.acked, 'every acknowledged record intact')
    t.equal(fsync.lost, 0)
  })
})
