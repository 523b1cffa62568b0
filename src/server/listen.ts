/** `plugcheck listen`: runs the listener until SIGINT/SIGTERM, then closes cleanly. */
import { resolve } from 'node:path'
import { describeSystemError, runtimeError } from '../errors.js'
import type { Io } from '../client/writer.js'
import { Listener } from './listener.js'

export interface ListenOptions {
  readonly host: string
  readonly port: number
  readonly dir: string
  readonly token?: string
}

export async function runListen(options: ListenOptions, io: Io): Promise<number> {
  const dir = resolve(options.dir)
  let listener: Listener
  try {
    listener = await Listener.start({ ...options, dir, log: (line) => io.err(line + '\n') })
  } catch (error) {
    throw runtimeError(`could not listen on ${options.host}:${options.port} with acks in ${dir}: ${describeSystemError(error)}`)
  }
  const address = listener.address()
  const shown = address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
  io.out(`listening on ${shown}, storing acks in ${dir}\n`)
  await new Promise<void>((done) => {
    process.once('SIGINT', done)
    process.once('SIGTERM', done)
  })
  await listener.close()
  io.err('plugcheck: listener stopped; every ack it reported as recorded is on disk\n')
  return 0
}
