/**
 * A campaign's cut command: run with the shell, in its own process group on POSIX so that a time-out
 * kills what the shell started too; its output kept (the last cutOutputBytes); judged by the shell's
 * exit, not by its pipes closing.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { describeSystemError } from '../../base/errors.js'

/** The cut command gets this long, then it is killed (with its process group) and the cut counts as failed. */
export const cutCommandTimeoutMs = 120_000
/** The cut command's output kept in the cycle's record: its last 4 KiB. */
export const cutOutputBytes = 4096
export interface CutResult {
  /** null when the command could not start or was killed. */
  readonly exitCode: number | null
  /** "exited 0", "exited 3", "was killed after 120 s", "could not start: ...". */
  readonly failure: string
  readonly output: string
}

/** How long the cut command's pipes are still read after its shell exited. */
const pipeLingerMs = 200

/** Runs the cut command with the shell, output captured (the last 4 KiB), bounded by cutCommandTimeoutMs. */
export function runCutCommand(command: string, done: (result: CutResult) => void): ChildProcess {
  // Its own process group (POSIX), so a time-out kills what the shell started too.
  const detached = process.platform !== 'win32'
  const child = spawn(command, { shell: true, stdio: ['ignore', 'pipe', 'pipe'], detached })
  let output = Buffer.alloc(0)
  const keep = (chunk: Buffer): void => {
    output = Buffer.concat([output, chunk])
    if (output.length > cutOutputBytes * 2) output = output.subarray(output.length - cutOutputBytes)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    try {
      if (detached && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL')
      else child.kill('SIGKILL')
    } catch {
      // already gone
    }
  }, cutCommandTimeoutMs)
  let finished = false
  const finish = (result: Omit<CutResult, 'output'>): void => {
    if (finished) return
    finished = true
    clearTimeout(timer)
    const text = output.subarray(Math.max(0, output.length - cutOutputBytes)).toString('utf8')
    done({ ...result, output: text.slice(-cutOutputBytes) })
  }
  child.on('error', (error) => finish({ exitCode: null, failure: `could not start: ${describeSystemError(error)}` }))
  // Judged by the shell's exit, not by its pipes closing: a script may leave a child behind that holds
  // them (a smart plug switched back on later, in the background). Once the shell has exited, what is
  // left in the pipes is read for a moment, then they are let go.
  child.on('exit', (code, signal) => {
    const result = timedOut
      ? { exitCode: null, failure: `was killed after ${cutCommandTimeoutMs / 1000} s` }
      : code !== null
        ? { exitCode: code, failure: `exited ${code}` }
        : { exitCode: null, failure: `was killed by ${signal}` }
    const release = (): void => {
      child.stdout?.destroy()
      child.stderr?.destroy()
      finish(result)
    }
    const linger = setTimeout(release, pipeLingerMs)
    child.once('close', () => {
      clearTimeout(linger)
      finish(result)
    })
  })
  return child
}
