/**
 * The listener's native calls: the numbers written again from each system's headers, and, on the
 * running system, the calls themselves on a real process and real loopback sockets.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { createServer, connect, type Socket } from 'node:net'
import { serverLimitConstants } from '../../../src/native/posix/server-limits.js'
import { nativePort } from '../../../src/native/index.js'
import { kernelQueuesOfPort } from '../../fixtures/kernel-queues.js'

t.test('the numbers of every system, from their headers', async (t) => {
  // Linux include/uapi/asm-generic/resource.h, socket.h, ioctls.h (TIOCOUTQ = SIOCOUTQ in linux/sockios.h).
  t.same(serverLimitConstants('linux'), {
    RLIMIT_NOFILE: 7,
    RLIM_INFINITY: 0xffffffffffffffffn,
    SO_SNDBUF: 7,
    SO_LINGER: 13,
    queuedBytes: { kind: 'ioctl', request: 0x5411 },
  })
  // xnu bsd/sys/resource.h, bsd/sys/socket.h (SO_NWRITE 0x1024).
  t.same(serverLimitConstants('darwin'), {
    RLIMIT_NOFILE: 8,
    RLIM_INFINITY: 0x7fffffffffffffffn,
    SO_SNDBUF: 0x1001,
    SO_LINGER: 0x80,
    queuedBytes: { kind: 'sockopt', name: 0x1024 },
  })
  // freebsd-src sys/sys/resource.h, socket.h, filio.h (FIONWRITE _IOR('f', 119, int)).
  const ior = (group: string, number: number, size: number): number =>
    0x40000000 + ((size & 0x1fff) << 16) + (group.charCodeAt(0) << 8) + number
  t.same(serverLimitConstants('freebsd'), {
    RLIMIT_NOFILE: 8,
    RLIM_INFINITY: 0x7fffffffffffffffn,
    SO_SNDBUF: 0x1001,
    SO_LINGER: 0x80,
    queuedBytes: { kind: 'ioctl', request: ior('f', 119, 4) },
  })
  // openbsd/src sys/sys/resource.h, socket.h: no call for the send queue.
  t.same(serverLimitConstants('openbsd'), {
    RLIMIT_NOFILE: 8,
    RLIM_INFINITY: 0x7fffffffffffffffn,
    SO_SNDBUF: 0x1001,
    SO_LINGER: 0x80,
    queuedBytes: null,
  })
})

t.test('the descriptor limit is read and its soft half set', async (t) => {
  const port = nativePort()
  const before = port.descriptorLimit()!
  const line = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'))!
  const value = (text: string): number => (text === 'unlimited' ? Infinity : Number(text))
  t.same(before, { soft: value(line[1]!), hard: value(line[2]!) }, 'as /proc/self/limits says')
  const lower = Math.min(before.soft, 4000) - 1
  port.setDescriptorSoftLimit(lower)
  t.same(port.descriptorLimit(), { soft: lower, hard: before.hard }, 'the soft limit moved, the hard one did not')
  port.setDescriptorSoftLimit(before.soft)
  t.same(port.descriptorLimit(), before)
  if (before.hard !== Infinity)
    t.throws(() => port.setDescriptorSoftLimit(before.hard + 1), { code: 'EINVAL', syscall: 'setrlimit' }, 'never past the hard limit')
})

t.test('a served socket: bounded send buffer, queued bytes, abortive close', async (t) => {
  const calls = nativePort().servedSockets!
  let served: Socket | undefined
  const server = createServer((s) => (served = s))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const serverPort = (server.address() as { port: number }).port
  const client = connect({ host: '127.0.0.1', port: serverPort })
  client.pause() // never reads
  client.on('error', () => undefined)
  while (served === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
  const fd = (served as unknown as { _handle: { fd: number } })._handle.fd
  t.equal(calls.boundSendBuffer(fd, 64 * 1024), 128 * 1024, 'Linux holds twice what is asked (socket(7))')
  served.write(Buffer.alloc(8 * 1024 * 1024))
  await new Promise((resolve) => setTimeout(resolve, 200))
  const queued = calls.queuedSendBytes(fd)!
  // The kernel lets the last buffer it takes overshoot SO_SNDBUF a little.
  t.ok(queued > 0 && queued <= 1.25 * 128 * 1024, `the kernel queue holds ${queued} bytes, about the bound`)
  t.equal(kernelQueuesOfPort(serverPort).sendQueueBytes, queued, '/proc/net/tcp says the same')
  calls.abortOnClose(fd)
  served.destroy()
  await new Promise((resolve) => setTimeout(resolve, 100))
  // A plain close would leave an orphan socket holding the queue until the peer reads it.
  t.same(kernelQueuesOfPort(serverPort), { sockets: 0, sendQueueBytes: 0 }, 'the served socket is gone at once, with its queue')
  client.destroy()
})
