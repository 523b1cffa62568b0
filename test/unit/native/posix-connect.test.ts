/**
 * The POSIX port's ack socket on loopback: connect is bounded by the time-out on every system (made
 * non-blocking and polled, since only Linux bounds a blocking connect with SO_SNDTIMEO), a refused
 * port is ECONNREFUSED at once, and an exchange works after the socket is made blocking again.
 */
import { spawn } from 'node:child_process'
import { connect as tcpConnect, type Socket } from 'node:net'
import t from 'tap'
import { nativePort } from '../../../src/native/index.js'
import { NativeError } from '../../../src/native/errors.js'

const stuckListener = `
const server = require('node:net').createServer()
server.listen(0, '127.0.0.1', 1, () => {
  require('node:fs').writeSync(1, server.address().port + '\\n')
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0) // never accepts again
})
`

const echoServer = `
const server = require('node:net').createServer((s) => s.pipe(s))
server.listen(0, '127.0.0.1', () => require('node:fs').writeSync(1, server.address().port + '\\n'))
`

const address = (port: number) => ({ address: '127.0.0.1', family: 4 as const, port, scopeId: 0 })

t.test('connect to a listener whose accept queue is full ends in ETIMEDOUT near the bound', async (t) => {
  const stuck = spawn(process.execPath, ['-e', stuckListener], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => void stuck.kill('SIGKILL'))
  const port = await new Promise<number>((resolve, reject) => {
    stuck.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))
    stuck.once('exit', (code) => reject(new Error(`stuck listener exited ${code}`)))
  })
  const fillers: Socket[] = []
  for (let i = 0; i < 4; i++) fillers.push(tcpConnect(port, '127.0.0.1').on('error', () => {}))
  t.teardown(() =>
    fillers.forEach((s) => {
      s.destroy()
    }),
  )
  await new Promise((resolve) => setTimeout(resolve, 200))

  const started = Date.now()
  const error = (() => {
    try {
      nativePort().connect(address(port), 400, `127.0.0.1:${port}`).close()
      return null
    } catch (e) {
      return e
    }
  })()
  const elapsedMs = Date.now() - started
  t.ok(error instanceof NativeError, String(error))
  t.equal((error as NativeError).code, 'ETIMEDOUT')
  t.match((error as NativeError).message, /connect '127\.0\.0\.1:\d+'$/)
  t.ok(elapsedMs >= 350 && elapsedMs < 5000, `bounded by the time-out (${elapsedMs} ms)`)
})

t.test('a refused port is ECONNREFUSED, and a fractional or zero time-out still connects', async (t) => {
  // In another process: the port's calls block this one's event loop.
  const echo = spawn(process.execPath, ['-e', echoServer], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => void echo.kill('SIGKILL'))
  const port = await new Promise<number>((resolve, reject) => {
    echo.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))
    echo.once('exit', (code) => reject(new Error(`echo server exited ${code}`)))
  })

  for (const timeoutMs of [0, 0.4, 999.9999, 2500]) {
    const socket = nativePort().connect(address(port), timeoutMs, 'echo')
    socket.sendAll(Buffer.from('ping'))
    const buf = Buffer.alloc(16)
    t.ok(socket.waitReadable(2000), `echo arrives (time-out ${timeoutMs})`)
    let got = 0
    for (let i = 0; i < 100 && got < 4; i++) {
      const n = socket.recvNow(buf.subarray(got))
      if (n > 0) got += n
      else socket.waitReadable(20)
    }
    t.equal(buf.subarray(0, got).toString(), 'ping')
    socket.close()
  }

  echo.kill('SIGKILL')
  await new Promise((resolve) => echo.once('exit', resolve))
  const error = (() => {
    try {
      nativePort().connect(address(port), 2000, 'closed')
      return null
    } catch (e) {
      return e
    }
  })()
  t.equal((error as NativeError).code, 'ECONNREFUSED')
})
