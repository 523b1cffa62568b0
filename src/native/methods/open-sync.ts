/** open_sync (O_SYNC) and open_datasync (O_DSYNC): the descriptor makes every write durable before it returns. */
import { O, pwriteAll } from '../libc.js'
import type { SyncMethodImpl } from './types.js'

export const openSyncMethod: SyncMethodImpl = {
  name: 'open_sync',
  openFlags: O.SYNC,
  writeDurable(fd, buf, offsetBytes) {
    pwriteAll(fd, buf, offsetBytes)
  },
}

export const openDatasyncMethod: SyncMethodImpl = {
  name: 'open_datasync',
  openFlags: O.DSYNC,
  writeDurable(fd, buf, offsetBytes) {
    pwriteAll(fd, buf, offsetBytes)
  },
}
