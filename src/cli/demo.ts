/**
 * `plugcheck demo`: the whole workflow on one machine. A listener on 127.0.0.1 with a temp
 * directory, a writer on a temp file, SIGKILL after a few seconds, verify, and what it means.
 * A killed process keeps the page cache, so this rehearses the workflow; it does not test storage.
 * Its temp directory (~70 MiB) is removed however it ends, a stop signal (Ctrl-C, a supervisor's
 * SIGTERM, a closed terminal) included: the signal kills the writer, the directory goes, and the demo
 * exits 128 + the signal.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Listener } from '../server/listen/listener.js'
import type { MethodName } from '../native/registry.js'
import { describeSystemError, runtimeError, usageError } from '../base/errors.js'
import { signalNumbers, type StopSignal } from '../client/write/stop-signals.js'
import { selfCommand } from '../exe/sea.js'
import { runVerify } from '../client/verify/verify.js'
import type { Io } from '../base/io.js'

export const binPath = fileURLToPath(new URL('../../bin/plugcheck.js', import.meta.url))

/** How long the demo waits for the listener to record the killed writer's end before it verifies anyway. */
const endWaitMs = 10_000
/** How long the writer may take to have its first ack recorded (a loaded machine starts it slowly). */
const firstAckWaitMs = 60_000

/** Until the listener has recorded an ack of the writer's run, the writer exited, or waitMs passed; which came first. */
async function firstAckRecorded(
  listener: Listener,
  exited: Promise<number | null>,
  waitMs: number,
): Promise<'acked' | 'exited' | 'timeout'> {
  let gone = false
  void exited.then(() => (gone = true))
  const deadlineMs = performance.now() + waitMs
  for (;;) {
    if (listener.store.summaries().some((run) => run.ackedThroughSeq > 0)) return 'acked'
    if (gone) return 'exited'
    if (performance.now() > deadlineMs) return 'timeout'
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Until every run the listener holds has its end recorded (the killed writer's: vanished), or waitMs passed. */
async function endsRecorded(listener: Listener, waitMs: number): Promise<void> {
  const deadlineMs = performance.now() + waitMs
  while (performance.now() < deadlineMs && listener.store.summaries().some((run) => run.end === undefined))
    await new Promise((resolve) => setTimeout(resolve, 20))
}

/** The real test, as the demo's last words say it. */
const realTest =
  'run `plugcheck listen` on a second machine, `plugcheck write` on the machine under test, pull its plug, reboot, and run `plugcheck verify`.'

/**
 * What the demo's verdict means, for the method it ran. A synced method's records all survive a killed
 * process (the page cache keeps them): a pass that rehearses, nothing more. The control (none) syncs
 * nothing and loses nothing to a kill either, so verify calls the cut inconclusive (exit 4): that is
 * the control's answer when no power cut reached the storage, not a failure of the demo.
 */
export function demoMeaning(method: MethodName): string {
  if (method === 'none')
    return (
      'What this means: none is the negative control: it syncs nothing and acknowledges each record as soon as it is ' +
      'written. A killed process leaves its writes in the kernel page cache, so it lost nothing, and verify says ' +
      'INCONCLUSIVE (exit 4): a control shows a cut was real only by losing records, which only a real power cut makes ' +
      'it do. This rehearses the workflow (listener, writer, verify) on one machine; it says nothing about your storage. ' +
      'In a real test the control runs beside a synced method (--method fdatasync,none) and must lose records: ' +
      realTest
    )
  return (
    'What this means: the writer was killed in the middle of its run, yet every record it had reported as ' +
    `synced (${method} returned) is on disk, because a killed process leaves its writes in the kernel page cache. This rehearses the ` +
    'workflow (listener, writer, verify) on one machine; it says nothing about your storage. Only a real power ' +
    `cut tests whether the drive and the stack above it keep what ${method} acknowledged: ${realTest}`
  )
}

export interface DemoOptions {
  readonly method: MethodName
  readonly killAfterS: number
  readonly json: boolean
}

/** The demo's temp directory in TMPDIR; a TMPDIR that is missing or no folder is the operator's to fix (exit 2). */
function makeDemoDir(): string {
  const parent = tmpdir()
  try {
    return mkdtempSync(join(parent, 'plugcheck-demo-'))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR')
      throw usageError(
        `the temp folder ${parent} does not exist or is not a folder`,
        'set TMPDIR to an existing folder (or unset it), then run the demo again',
      )
    throw runtimeError(`could not make the demo's directory in ${parent}: ${describeSystemError(error)}`, 'set TMPDIR to a writable folder')
  }
}

/** The first stop signal (SIGINT, SIGTERM, SIGHUP) as a promise; release removes the handlers. */
function stopSignal(): { readonly received: Promise<StopSignal>; readonly release: () => void } {
  const offs: Array<() => void> = []
  const received = new Promise<StopSignal>((resolve) => {
    for (const signal of Object.keys(signalNumbers) as StopSignal[]) {
      const handler = (): void => resolve(signal)
      process.on(signal, handler)
      offs.push(() => process.off(signal, handler))
    }
  })
  return {
    received,
    release: () => {
      for (const off of offs) off()
    },
  }
}

/** The writer the demo runs, once spawned, with its exit: what a stop signal kills before the directory goes. */
interface DemoWriter {
  process?: ChildProcess
  exited?: Promise<number | null>
}

export async function runDemo(options: DemoOptions, io: Io): Promise<number> {
  const dir = makeDemoDir()
  // Handled from here on, so Node's default action (the process ends at once) never leaves the directory behind.
  const stop = stopSignal()
  const writer: DemoWriter = {}
  let listener: Listener | undefined
  try {
    listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: join(dir, 'listener') })
    const outcome = await Promise.race([demoSteps(listener, dir, writer, options, io), stop.received])
    if (typeof outcome === 'number') return outcome
    // Stopped: the writer goes first (it writes into the directory), then the finally removes it.
    writer.process?.kill('SIGKILL')
    await writer.exited
    io.err(`plugcheck demo: stopped by ${outcome}; its writer killed and its temp directory removed\n`)
    return 128 + signalNumbers[outcome]
  } finally {
    stop.release()
    await listener?.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Writer, kill, verify, and what it means: the demo until a stop signal, if one comes. */
async function demoSteps(listener: Listener, dir: string, running: DemoWriter, options: DemoOptions, io: Io): Promise<number> {
  const server = `127.0.0.1:${listener.address().port}`
  const file = join(dir, 'data.plugcheck')
  io.err(`plugcheck demo: listener on ${server}; writer on ${file} with ${options.method}; SIGKILL in ${options.killAfterS} s\n`)
  const [plugcheck, ...plugcheckArgs] = selfCommand(binPath)
  const writer = spawn(
    plugcheck!,
    [...plugcheckArgs, 'write', '--server', server, '--file', file, '--method', options.method, '--size', '64MiB'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  let writerStderr = ''
  writer.stderr.on('data', (chunk: Buffer) => (writerStderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => writer.on('exit', (code) => resolve(code)))
  running.process = writer
  running.exited = exited
  // The kill's time counts from the first ack the listener recorded, not from the spawn: a writer
  // killed before it announced its run would leave verify nothing to judge.
  const started = await firstAckRecorded(listener, exited, firstAckWaitMs)
  if (started === 'timeout') {
    writer.kill('SIGKILL')
    await exited
    throw runtimeError(
      `the writer had no ack recorded within ${firstAckWaitMs / 1000} s: ${writerStderr.trim() || 'it said nothing'}`,
      'run plugcheck listen and plugcheck write by hand to see where it stops',
    )
  }
  const early = await Promise.race([
    exited,
    new Promise<'timer'>((resolve) => setTimeout(() => resolve('timer'), options.killAfterS * 1000)),
  ])
  if (early !== 'timer') throw runtimeError(`the writer stopped by itself (exit ${early}) before the kill: ${writerStderr.trim()}`)
  writer.kill('SIGKILL')
  await exited
  io.err(`plugcheck demo: writer killed with SIGKILL; verifying\n`)
  // The listener sees the writer's connection close a moment after the kill, and answers its run as
  // ended once that end is recorded (until then verify says it is still being written, exit 2).
  await endsRecorded(listener, endWaitMs)
  const code = await runVerify({ source: { server: { host: '127.0.0.1', port: listener.address().port } }, file, json: options.json }, io)
  if (!options.json) io.out(`\n${demoMeaning(options.method)}\n`)
  return code
}
