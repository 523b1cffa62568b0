/** `plugcheck listen`: runs the listener until SIGINT/SIGTERM, then closes cleanly. */
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import { PlugcheckError, describeSystemError, exitCodes, runtimeError } from '../errors.js'
import type { Io } from '../client/writer.js'
import { Listener } from './listener.js'

export interface CampaignOptions {
  readonly name: string
  readonly cycles: number
  readonly cutCommand: string
  /** [min, max] seconds after the writer is steady. */
  readonly cutAfterS: readonly [number, number]
  readonly rebootTimeoutS: number
  /** Seed of the cut moments; random (and logged) when absent. */
  readonly seed?: number
}

export interface ListenOptions {
  readonly host: string
  readonly port: number
  readonly dir: string
  readonly token?: string
  readonly maxConnections?: number
  /** Also append every event as a JSON line here. */
  readonly eventsFile?: string
  readonly campaign?: CampaignOptions
}

/** 127.0.0.0/8, ::1, localhost: only this machine can connect. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1' || host === '0:0:0:0:0:0:0:1') return true
  if (isIP(host) === 4) return host.startsWith('127.')
  return /^::ffff:127\./i.test(host)
}

export async function runListen(options: ListenOptions, io: Io): Promise<number> {
  const dir = resolve(options.dir)
  let listener: Listener
  try {
    listener = await Listener.start({ ...options, dir, log: (line) => io.err(line + '\n') })
  } catch (error) {
    // A configuration problem (another listener holds --dir) is reported as it is: exit 2.
    if (error instanceof PlugcheckError && error.exitCode === exitCodes.usage) throw error
    throw runtimeError(`could not listen on ${options.host}:${options.port} with acks in ${dir}: ${describeSystemError(error)}`)
  }
  const address = listener.address()
  const shown = address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
  io.out(`listening on ${shown}, storing acks in ${dir}\n`)
  if (options.token === undefined && !isLoopbackHost(options.host)) {
    io.err(
      `plugcheck: warning: listening on ${shown} without --token: anyone who can reach this port can announce runs, and a run announced for another machine's host and path shadows the real one in verify\n` +
        'hint: start the listener and every writer and verifier with the same --token SECRET (it crosses the network in clear text), or listen on a trusted network only\n',
    )
  }
  await new Promise<void>((done) => {
    process.once('SIGINT', done)
    process.once('SIGTERM', done)
  })
  await listener.close()
  io.err('plugcheck: listener stopped; every ack it reported as recorded is on disk\n')
  return 0
}
