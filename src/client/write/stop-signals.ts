/**
 * The signals that stop a write (SIGINT, SIGTERM, SIGHUP), and what a stopped write says.
 *
 * Node runs a JS signal handler only when the event loop turns, which a synchronous loop never lets
 * it do. Blocking the signals with pthread_sigmask and polling sigpending() would not work either: the
 * mask is per thread, Node's other threads (libuv pool, V8 platform) leave SIGTERM unblocked, and the
 * kernel then delivers it to one of them with its default action, which kills the process. So the
 * handlers are ordinary process.on() handlers that set a flag, and the loop yields to the event loop
 * once per housekeeping tick (every 50 ms, after the ack has left): that costs one setImmediate hop (a
 * few microseconds) per 50 ms, and a signal is seen within 50 ms plus one sync. The run then ends with
 * 'interrupted' and exits 128 + the signal number (130, 143, 129 for SIGHUP: a dropped SSH session or
 * a closed terminal), the status a shell reports for a process that a signal ended.
 */

/** SIGHUP too: a dropped SSH session or a closed terminal ends a run as interrupted, not as a vanished writer (a cut). */
export const signalNumbers = { SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const
export type StopSignal = keyof typeof signalNumbers

/** The signal received so far, if any; release removes the handlers. */
export interface StopSignals {
  readonly received: () => StopSignal | undefined
  readonly release: () => void
}

/** SIGINT/SIGTERM/SIGHUP set a flag the loop reads at each housekeeping tick (see the module header); `before`: one that came before the loop. */
export function catchStopSignals(before: StopSignal | undefined): StopSignals {
  let received = before
  const handlers = (Object.keys(signalNumbers) as StopSignal[]).map((signal) => {
    const handler = (): void => {
      received ??= signal
    }
    process.on(signal, handler)
    return () => process.off(signal, handler)
  })
  return {
    received: () => received,
    release: () =>
      handlers.forEach((off) => {
        off()
      }),
  }
}

/** One turn of the event loop: lets signal handlers run. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

/** What a write stopped by a signal says once every ack is recorded. */
export function stoppedLine(signal: string): string {
  return `plugcheck: stopped by ${signal}; every ack is recorded at the listener\n`
}
