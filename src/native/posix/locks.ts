/**
 * The POSIX port's file locks: flock(LOCK_EX | LOCK_NB) on a descriptor held open, released by closing
 * it. Never blocks: a held lock is 'busy', and a FIFO at the path cannot hang the open.
 */
import koffi from 'koffi'
import { fstatSync, type Stats } from 'node:fs'
import { NativeError } from '../errors.js'
import type { FileLock, NativePort } from '../port.js'
import { LOCK_EX, LOCK_NB, type PosixConstants } from './constants.js'
import { errnoError, openFile, type Libc } from './libc.js'

/** The port's lockExclusive, on the C library loaded on first use (c) and the system's constants (k). */
export function lockCalls(c: () => Libc, k: PosixConstants): Pick<NativePort, 'lockExclusive'> {
  return {
    lockExclusive(path: string, create: boolean): FileLock | 'busy' | 'missing' {
      const lib = c()
      let fd: number
      try {
        // O_NONBLOCK: an open must never hang on a FIFO someone put at the path.
        fd = openFile(lib, path, (create ? k.O_RDWR | k.O_CREAT : k.O_RDONLY) | k.O_NONBLOCK)
      } catch (error) {
        if (!create && error instanceof NativeError && error.code === 'ENOENT') return 'missing'
        throw error
      }
      let stats: Stats
      try {
        stats = fstatSync(fd)
        if (!stats.isFile()) throw new NativeError('flock', 'EINVAL', -22, 'not a regular file', path)
        for (;;) {
          if ((lib.flock(fd, LOCK_EX | LOCK_NB) as number) === 0) break
          const e = koffi.errno()
          if (e === k.EAGAIN) {
            lib.close(fd)
            return 'busy'
          }
          if (e !== k.EINTR) throw errnoError(lib, 'flock', e, path)
        }
      } catch (error) {
        lib.close(fd)
        throw error
      }
      let held = true
      return {
        dev: stats.dev,
        ino: stats.ino,
        release() {
          if (held) lib.close(fd)
          held = false
        },
      }
    },
  }
}
