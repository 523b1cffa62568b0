/** fsync and fdatasync: a plain write, then one sync call that must cover it. */
import { fdatasync, fsync, pwriteAll } from '../libc.js'
import type { SyncMethodImpl } from './types.js'

export const fsyncMethod: SyncMethodImpl = {
  name: 'fsync',
  openFlags: 0,
  writeDurable(fd, buf, offsetBytes) {
    pwriteAll(fd, buf, offsetBytes)
    fsync(fd)
  },
}

export const fdatasyncMethod: SyncMethodImpl = {
  name: 'fdatasync',
  openFlags: 0,
  writeDurable(fd, buf, offsetBytes) {
    pwriteAll(fd, buf, offsetBytes)
    fdatasync(fd)
  },
}
