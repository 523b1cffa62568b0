/** pwritev2_dsync: Linux's per-write RWF_DSYNC flag, O_DSYNC for one call. */
import { RWF_DSYNC, pwritev2Sync } from '../libc.js'
import type { SyncMethodImpl } from './types.js'

export const pwritev2DsyncMethod: SyncMethodImpl = {
  name: 'pwritev2_dsync',
  openFlags: 0,
  writeDurable(fd, buf, offsetBytes) {
    pwritev2Sync(fd, buf, offsetBytes, RWF_DSYNC)
  },
}
