import { fdatasyncMethod, fsyncMethod } from './fsync.js'
import { noneMethod } from './none.js'
import { openDatasyncMethod, openSyncMethod } from './open-sync.js'
import { pwritev2DsyncMethod } from './pwritev2-dsync.js'
import type { MethodName, SyncMethodImpl } from './types.js'

export const methodImpls: Record<Exclude<MethodName, 'fsync_writethrough'>, SyncMethodImpl> = {
  fsync: fsyncMethod,
  fdatasync: fdatasyncMethod,
  open_sync: openSyncMethod,
  open_datasync: openDatasyncMethod,
  pwritev2_dsync: pwritev2DsyncMethod,
  none: noneMethod,
}
