/**
 * The Windows toolchain: the Windows node.exe under Wine, with the compiled plugcheck (dist/bin.js).
 * First setup (Wine prefix, node.exe, koffi's Windows build) takes tens of seconds; later runs reuse it.
 */
import { rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { build } from 'esbuild'
import t from 'tap'
import { distBin, ensureWine, runWine, runWineNode, winePath, wineRunTimeoutMs } from '../fixtures/wine.js'

const repoRoot = dirname(dirname(distBin))

t.test('plugcheck under Wine', async (t) => {
  ensureWine()

  t.test('node.exe is the Windows build on a Windows 10 prefix', async (t) => {
    const result = await runWineNode(['-p', 'process.platform + " " + os.release()'], { timeoutMs: wineRunTimeoutMs })
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, /^win32 10\.0\.\d+\r?\n$/)
  })

  t.test("koffi's Windows build loads beside the Linux one", async (t) => {
    const result = await runWineNode(['-p', "require('koffi').version"], { timeoutMs: wineRunTimeoutMs })
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, /^\d+\.\d+\.\d+\r?\n$/)
  })

  t.test('exit codes come back through Wine', async (t) => {
    const result = await runWineNode(['-e', 'process.exit(7)'], { timeoutMs: wineRunTimeoutMs })
    t.equal(result.code, 7)
  })

  t.test('plugcheck --help prints the usage and exits 0', async (t) => {
    const result = await runWine(['--help'], { timeoutMs: wineRunTimeoutMs })
    t.equal(result.code, 0, result.stderr)
    t.match(result.stdout, /^plugcheck <command> \[options\]/)
    t.match(result.stdout, /Commands:/)
    t.equal(result.stderr, '')
  })

  t.test('an unknown command is a usage error: exit 2, one line naming it', async (t) => {
    const result = await runWine(['no-such-command'], { timeoutMs: wineRunTimeoutMs })
    t.equal(result.code, 2, result.stderr)
    t.match(result.stderr, /no-such-command/)
    t.notMatch(result.stderr, /internal error|\n\s+at /)
  })
})

t.test('the checksum under Windows is the wasm build and matches the Linux one', async (t) => {
  ensureWine()
  const { checksumImplementation, xxh64 } = await import('../../src/record/checksum.js')
  // dist/ is one bundle: the checksum module alone is bundled the same way, beside node_modules/ so
  // node.exe resolves xxhash-wasm (and fails to load @node-rs/xxhash's Linux build) as dist/ would.
  const probe = join(repoRoot, 'node_modules', '.cache', 'plugcheck-wine', `checksum-probe-${process.pid}.mjs`)
  t.teardown(() => rmSync(probe, { force: true }))
  await build({
    entryPoints: [join(repoRoot, 'src', 'record', 'checksum.ts')],
    outfile: probe,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['@node-rs/xxhash', 'xxhash-wasm'],
    logLevel: 'warning',
  })
  const moduleUrl = `file:///${winePath(probe).replace(/\\/g, '/')}`
  const sample = 'a data file written on Windows verifies on Linux'
  const script = `import(${JSON.stringify(moduleUrl)}).then((m) => console.log(m.checksumImplementation, m.xxh64(Buffer.from(${JSON.stringify(sample)})).toString(16)))`
  const result = await runWineNode(['-e', script], { timeoutMs: wineRunTimeoutMs })
  t.equal(result.code, 0, result.stderr)
  t.equal(result.stdout.trim(), `wasm ${xxh64(Buffer.from(sample)).toString(16)}`)
  t.equal(checksumImplementation, 'native', 'Linux uses the native build')
})
