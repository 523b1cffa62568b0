/** none: no sync at all. The negative control: a real power cut must show losses. */
import { pwriteAll } from '../libc.js'
import type { SyncMethodImpl } from './types.js'

export const noneMethod: SyncMethodImpl = {
  name: 'none',
  openFlags: 0,
  writeDurable(fd, buf, offsetBytes) {
    pwriteAll(fd, buf, offsetBytes)
  },
}
