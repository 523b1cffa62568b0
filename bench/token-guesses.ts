/**
 * Token guesses per second: how fast one address learns whether a --token guess is right. A
 * `plugcheck listen --token` child on 127.0.0.1; N connections in parallel from this process, each
 * connecting, saying hello with a wrong token and waiting for the answer, for S seconds. Counts the
 * answers that say the token is wrong ('unauthorized': one guess tested) and the hellos refused
 * without a look at the token ('limit').
 *
 * Usage: node --import tsx bench/token-guesses.ts [--seconds 5] [--parallel 64] [--bin bin/plugcheck.js]
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { FrameDecoder, encodeFrame, maxServerFrameBytes } from '../src/protocol/framing.js'
import { serverMessageSchema } from '../src/protocol/messages.js'
import { plugcheckBin } from './common.js'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    parallel: { type: 'string', default: '64' },
    bin: { type: 'string', default: plugcheckBin },
  },
})
const seconds = Number(values.seconds)
const parallel = Number(values.parallel)

async function startListener(dir: string): Promise<{ port: number; stop: () => void }> {
  const child = spawn(
    process.execPath,
    [values.bin!, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', dir, '--token', 'the-real-token'],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString()
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(out)
      if (match !== null) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`listener exited (${code})`)))
  })
  return { port, stop: () => child.kill('SIGKILL') }
}

/** One guess: its answer's error code ('unauthorized', 'limit', ...). */
function guess(port: number, token: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    const decoder = new FrameDecoder(serverMessageSchema, maxServerFrameBytes)
    socket.on('connect', () => socket.write(encodeFrame({ type: 'hello', protocol: 4, role: 'writer', token })))
    socket.on('data', (chunk) => {
      const reply = decoder.push(chunk)[0]
      if (reply === undefined) return
      socket.destroy()
      resolve(reply.type === 'error' ? reply.code : reply.type)
    })
    socket.on('error', () => resolve('reset'))
    socket.on('close', () => resolve('closed'))
  })
}

const dir = mkdtempSync(join(tmpdir(), 'plugcheck-guesses-'))
const listener = await startListener(dir)
const counts = new Map<string, number>()
const until = performance.now() + seconds * 1000
let n = 0
await Promise.all(
  Array.from({ length: parallel }, async () => {
    while (performance.now() < until) {
      const code = await guess(listener.port, `guess-${n++}`)
      counts.set(code, (counts.get(code) ?? 0) + 1)
    }
  }),
)
listener.stop()
rmSync(dir, { recursive: true, force: true })
const tested = counts.get('unauthorized') ?? 0
console.log(
  `${parallel} connections in parallel for ${seconds} s from 127.0.0.1: ${tested} guesses answered (${(tested / seconds).toFixed(1)}/s); other answers: ${JSON.stringify(Object.fromEntries([...counts].filter(([k]) => k !== 'unauthorized')))}`,
)
