/**
 * ensureWritableStdio: a stdout or stderr Node cannot open (EBADF, as Windows node under Wine with a
 * Unix pipe) is replaced by one writing to the descriptor directly, everything in order; a stream
 * that opens is left alone; any other failure is not hidden. The Wine case itself runs in
 * test/exe/wine-start.test.ts; here Node's getter is made to fail the same way, in a real child
 * process whose stdout and stderr are pipes.
 */
import { spawn, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { ensureWritableStdio } from '../../../src/base/stdio-fallback.js'

const modulePath = fileURLToPath(new URL('../../../src/base/stdio-fallback.ts', import.meta.url))

/** A child node whose stdout and stderr getters throw what Node throws under Wine, then print through them. */
function childWithUnopenableStdio(): ReturnType<typeof spawnSync> {
  const script = `
import { ensureWritableStdio } from ${JSON.stringify(modulePath)}
for (const name of ['stdout', 'stderr'])
  Object.defineProperty(process, name, {
    configurable: true,
    get() { throw Object.assign(new Error('open EBADF'), { code: 'EBADF', errno: -9, syscall: 'open' }) },
  })
ensureWritableStdio()
ensureWritableStdio()
process.stderr.write(\`stderr fd \${process.stderr.fd} tty \${process.stderr.isTTY}\\n\`)
process.stdout.write('first\\n')
process.stdout.write(Buffer.alloc(256 * 1024, 'x'))
process.stdout.write('\\nlast\\n', () => process.exit(7))
`
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    maxBuffer: 8 * 1024 * 1024,
    timeout: 60_000,
  })
}

t.test('an unopenable stdout and stderr: written to directly, whole and in order, before the exit', async (t) => {
  const result = childWithUnopenableStdio()
  t.equal(result.status, 7, String(result.stderr))
  t.equal(result.stderr, 'stderr fd 2 tty false\n')
  const stdout = String(result.stdout)
  // Compared as a flag, not a diff: a mismatch of 256 KiB would be printed whole.
  t.ok(
    stdout === `first\n${'x'.repeat(256 * 1024)}\nlast\n`,
    `every byte in order, the 256 KiB write whole (${stdout.length} bytes: ${JSON.stringify(stdout.slice(0, 40))} ...)`,
  )
})

t.test('a pipe left non-blocking whose reader is slow: every byte still arrives, in order', async (t) => {
  // Node makes a pipe it opened non-blocking (here the child's stderr, opened by the loader before the
  // getters fail; as any process that shares the pipe can leave it). A full pipe then says EAGAIN,
  // which the fallback waits out as a blocking write would, instead of dropping the rest.
  const script = `
import { ensureWritableStdio } from ${JSON.stringify(modulePath)}
void process.stdout
for (const name of ['stdout', 'stderr'])
  Object.defineProperty(process, name, {
    configurable: true,
    get() { throw Object.assign(new Error('open EBADF'), { code: 'EBADF', errno: -9, syscall: 'open' }) },
  })
ensureWritableStdio()
process.stdout.write(Buffer.alloc(1024 * 1024, 'y'))
process.stdout.write('\\nend\\n', () => process.exit(0))
`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
  const closed = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)))
  const chunks: Buffer[] = []
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  child.stdout.pause()
  // The reader starts late: by then the child has filled the pipe (64 KiB) and met EAGAIN.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  child.stdout.on('data', (c: Buffer) => chunks.push(c))
  child.stdout.resume()
  t.equal(await closed, 0, stderr)
  const stdout = Buffer.concat(chunks).toString()
  t.ok(stdout === `${'y'.repeat(1024 * 1024)}\nend\n`, `every byte in order (${stdout.length} of ${1024 * 1024 + 5} bytes)`)
})

t.test('a stream that opens is left as it is', async (t) => {
  const stdout = process.stdout
  const stderr = process.stderr
  ensureWritableStdio()
  t.equal(process.stdout, stdout)
  t.equal(process.stderr, stderr)
})

t.test('any other failure to open a stream is not hidden', async (t) => {
  const fake = {
    get stdout(): never {
      throw Object.assign(new Error('unknown stream file type'), { code: 'ERR_UNKNOWN_STREAM_TYPE' })
    },
  } as unknown as NodeJS.Process
  t.throws(() => ensureWritableStdio(fake), { code: 'ERR_UNKNOWN_STREAM_TYPE' })
})
