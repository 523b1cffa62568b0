/**
 * process.stdout and process.stderr where Node cannot open them as streams. Windows node under Wine
 * with a Unix pipe as stdout (`wine plugcheck-win-x64.exe --help | less`, `$(...)`, a script capturing
 * output) throws "open EBADF" at the first touch of process.stdout: Node opens a pipe as a libuv pipe,
 * which wants a Windows named pipe, and a Unix pipe under Wine is none (measured with Wine 8 and node
 * 20.20.2). A plain write to the same descriptor works there, so such a stream, and only such a one, is
 * replaced by one that writes synchronously, as Node's own stream for a file does. A stream that
 * opens is left as it is.
 */
import { writeSync } from 'node:fs'
import { Writable } from 'node:stream'

const stdio = [
  ['stdout', 1],
  ['stderr', 2],
] as const

/** Call before anything touches process.stdout or process.stderr; cheap, and harmless twice. */
export function ensureWritableStdio(proc: NodeJS.Process = process): void {
  for (const [name, fd] of stdio) {
    try {
      void proc[name]
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EBADF') throw error
      const stream = syncWriteStream(fd)
      Object.defineProperty(proc, name, { configurable: true, enumerable: true, get: () => stream })
    }
  }
}

/** Parks the thread for a moment: a full non-blocking pipe (EAGAIN) is written again once its reader took some. */
const pause = new Int32Array(new SharedArrayBuffer(4))

/** Writes all of chunk to fd, waiting out a full pipe that was left non-blocking (EAGAIN) as a blocking write would. */
function writeWhole(fd: number, chunk: Buffer): void {
  for (let doneBytes = 0; doneBytes < chunk.length; ) {
    try {
      doneBytes += writeSync(fd, chunk, doneBytes)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error
      Atomics.wait(pause, 0, 0, 1)
    }
  }
}

/** A stream whose every write is done, whole, before its callback: the order of output and exit holds. */
function syncWriteStream(fd: number): NodeJS.WriteStream {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      try {
        writeWhole(fd, chunk)
        callback()
      } catch (error) {
        callback(error as Error)
      }
    },
  })
  return Object.assign(stream, { fd, isTTY: false }) as unknown as NodeJS.WriteStream
}
