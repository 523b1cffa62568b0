/**
 * Sends the writer's frames to the listener from a second thread, so the write loop hands an ack
 * over in well under a microsecond instead of waiting ~3-5 us in send() (on loopback, send() also
 * runs the receiver's TCP processing). The write loop copies each frame into a shared ring right
 * after the sync that covers it returned; the pump thread writes whatever the ring holds with one
 * write(2). While a write is under way the loop goes on, and the frames it queues meanwhile leave
 * together with the next write: an ack waits at most for the one write before it (coalescing, never
 * a timer). Every frame the channel sends goes through the ring once the pump runs, so frames never
 * interleave and keep their order.
 *
 * The pump is a plain-JavaScript worker with no imports beyond Node's own (fs.writeSync on the
 * socket's descriptor), so it starts the same from TypeScript sources, a build or a single
 * executable. POSIX only: a Windows SOCKET is not a descriptor, and there the channel sends inline.
 *
 * Fault model: a write that fails (the listener closed, or stopped reading for longer than the
 * socket's SO_SNDTIMEO) stops the pump for good; the loop sees it at its next frame or wait and
 * reports it as a lost connection. The descriptor is closed only after the pump said it is done with
 * it, so a write can never land on a descriptor number reused for a data file.
 */
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads'

/** Ring capacity: ~1,200 ack frames, a few milliseconds of the fastest writer; a power of two. */
const ringBytes = 64 * 1024
const mask = ringBytes - 1
/** Int32 slots before the ring: bytes queued (ever, wrapping), bytes written (ever, wrapping), stop, done, sleeping. */
const queuedAt = 0
const writtenAt = 1
const stopAt = 2
const doneAt = 3
const sleepingAt = 4
const headerBytes = 32
/** How often an idle pump looks at the stop flag. */
const stopCheckMs = 20

/** The pump thread: writes [written, queued) of the ring until told to stop or a write fails. */
const pumpSource = `
const { workerData } = require('node:worker_threads')
const { writeSync } = require('node:fs')
const { fd, shared, ringBytes, headerBytes, port, stopCheckMs } = workerData
const head = new Int32Array(shared, 0, headerBytes / 4)
const ring = new Uint8Array(shared, headerBytes, ringBytes)
try {
  for (;;) {
    const queued = Atomics.load(head, ${queuedAt})
    const written = head[${writtenAt}]
    if (queued === written) {
      if (Atomics.load(head, ${stopAt}) !== 0) break
      Atomics.store(head, ${sleepingAt}, 1)
      Atomics.wait(head, ${queuedAt}, queued, stopCheckMs) // a stop sets no counter: look again now and then
      Atomics.store(head, ${sleepingAt}, 0)
      continue
    }
    const start = written & ${mask}
    const n = writeSync(fd, ring, start, Math.min((queued - written) >>> 0, ringBytes - start))
    Atomics.store(head, ${writtenAt}, (written + n) | 0)
    Atomics.notify(head, ${writtenAt})
  }
} catch (error) {
  port.postMessage({ code: String(error.code ?? 'EIO'), message: String(error.message) })
} finally {
  Atomics.store(head, ${doneAt}, 1)
  Atomics.notify(head, ${writtenAt})
}
`

/** A failed write of the pump, as fs reported it. */
export interface PumpFailure {
  readonly code: string
  readonly message: string
}

export class AckPump {
  /** Larger frames are sent by the caller itself, after flush(). */
  static readonly frameBytesMax = ringBytes
  private readonly head: Int32Array
  private readonly ring: Uint8Array
  private failure: PumpFailure | undefined

  private constructor(
    shared: SharedArrayBuffer,
    private readonly worker: Worker,
    private readonly port: MessagePort,
    private readonly stallMs: number,
  ) {
    this.head = new Int32Array(shared, 0, headerBytes / 4)
    this.ring = new Uint8Array(shared, headerBytes, ringBytes)
  }

  /** Starts a pump writing to fd; stallMs bounds a wait for room or for the ring to empty. */
  static start(fd: number, stallMs: number): AckPump {
    const shared = new SharedArrayBuffer(headerBytes + ringBytes)
    const { port1, port2 } = new MessageChannel()
    const worker = new Worker(pumpSource, { eval: true, workerData: { fd, shared, ringBytes, headerBytes, port: port2, stopCheckMs }, transferList: [port2] })
    worker.unref() // the write loop, not the pump, decides when the process is done
    const pump = new AckPump(shared, worker, port1, stallMs)
    // The thread could not start or died outside its own try (seen when the loop yields to the event loop).
    worker.on('error', (error) => pump.died(error))
    return pump
  }

  private died(error: Error): void {
    this.failure ??= { code: 'EIO', message: `the send thread failed: ${error.message}` }
    Atomics.store(this.head, doneAt, 1)
    Atomics.notify(this.head, writtenAt)
  }

  /** Queues frame; waits only when the ring is full. Throws the pump's failure once there is one. */
  push(frame: Uint8Array): void {
    const queued = this.head[queuedAt]!
    if (ringBytes - ((queued - Atomics.load(this.head, writtenAt)) >>> 0) < frame.length) this.waitWritten(queued + frame.length - ringBytes)
    this.check()
    const start = queued & mask
    const first = Math.min(frame.length, ringBytes - start)
    this.ring.set(first === frame.length ? frame : frame.subarray(0, first), start)
    if (first < frame.length) this.ring.set(frame.subarray(first), 0)
    Atomics.store(this.head, queuedAt, (queued + frame.length) | 0)
    // A busy pump takes this frame with its next write; only a sleeping one needs the wake-up (a
    // futex call). It says it sleeps before it waits, and waits only while the count is unchanged.
    if (Atomics.load(this.head, sleepingAt) !== 0) Atomics.notify(this.head, queuedAt, 1)
  }

  /** Waits until every queued byte is written to the socket. */
  flush(): void {
    this.waitWritten(this.head[queuedAt]!)
    this.check()
  }

  /** The pump's failure, once it has one (a lost or stalled connection). */
  failed(): PumpFailure | undefined {
    if (this.failure === undefined && Atomics.load(this.head, doneAt) !== 0) {
      this.failure = (receiveMessageOnPort(this.port)?.message as PumpFailure | undefined) ?? { code: 'EPIPE', message: 'the pump stopped' }
    }
    return this.failure
  }

  /**
   * Stops the pump after it wrote what it holds; true once it no longer touches the descriptor (the
   * caller may close it then, and only then).
   */
  stop(): boolean {
    Atomics.store(this.head, stopAt, 1)
    Atomics.notify(this.head, queuedAt)
    const deadline = Date.now() + this.stallMs
    while (Atomics.load(this.head, doneAt) === 0) {
      const leftMs = deadline - Date.now()
      if (leftMs <= 0) return false
      Atomics.wait(this.head, writtenAt, this.head[writtenAt]!, leftMs)
    }
    void this.worker.terminate()
    this.port.close()
    return true
  }

  private check(): void {
    const failure = this.failed()
    if (failure !== undefined) throw Object.assign(new Error(failure.message), { code: failure.code })
  }

  /** Waits until the written count reaches target (both wrapping counters), the pump fails, or it stalls. */
  private waitWritten(target: number): void {
    let deadline = Date.now() + this.stallMs
    let written = Atomics.load(this.head, writtenAt)
    while (((target - written) | 0) > 0) {
      this.check()
      Atomics.wait(this.head, writtenAt, written, 100)
      const now = Atomics.load(this.head, writtenAt)
      if (now !== written) deadline = Date.now() + this.stallMs
      else if (Date.now() > deadline) throw Object.assign(new Error('the listener stopped reading'), { code: 'ETIMEDOUT' })
      written = now
    }
  }
}
