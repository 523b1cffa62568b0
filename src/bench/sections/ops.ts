/**
 * One op per row: the system calls pg_test_fsync times, done synchronously through the native
 * layer, with nothing else in the op that a C loop would not do.
 *
 * Offsets: op i writes its pieces back to back at the next free place in the 16 MiB region,
 * wrapping at the end (pg_test_fsync rewrites the same offset every time, which lets a device or a
 * cache get away with less work than a WAL writer's). Payload: slices of the random source; passes
 * alternate between two windows of it, so no op rewrites the bytes already on disk. The slices are
 * cut once per row, not per op.
 */
import { NativeError, O, RWF_DSYNC, close, fdatasync, fsync, open, pwriteAll, pwritev2Sync } from '../../native/libc.js'
import { methodImpls } from '../../native/methods/index.js'
import { sourceShiftBytes, type ScratchFile } from '../scratch-file.js'
import type { RowSpec } from './plan.js'

export type PreparedRow =
  | { readonly kind: 'ready'; readonly op: (opIndex: number) => void; readonly release: () => void }
  | { readonly kind: 'open-failed'; readonly error: NativeError }

function flagNames(spec: RowSpec): string {
  const names = ['O_RDWR']
  if (spec.shape === 'sync-at-open') names.push(spec.method === 'open_sync' ? 'O_SYNC' : 'O_DSYNC')
  if (spec.direct) names.push('O_DIRECT')
  return names.join('|')
}

/** The system calls of one op, for people and for the JSON (the "same call" table refers to them). */
export function describeCalls(spec: RowSpec): string {
  const times = spec.writesPerOp === 1 ? '' : ` x${spec.writesPerOp}`
  switch (spec.shape) {
    case 'sync-at-open':
      return `pwrite${times} on an ${flagNames(spec)} descriptor`
    case 'write-then-sync':
      return `pwrite${times}, ${spec.method === 'fsync_writethrough' ? 'fcntl(F_FULLFSYNC) (macOS) or FlushFileBuffers (Windows)' : spec.method}`
    case 'pwritev2-dsync':
      return `pwritev2(RWF_DSYNC)${times}`
    case 'write-only':
      return `pwrite${times}`
    case 'write-fsync-close':
      return 'open, pwrite, fsync, close, open, close'
    case 'write-close-fsync':
      return 'open, pwrite, close, open, fsync, close'
  }
}

/** Opens what the row needs and returns its op; release() closes it. */
export function prepareRow(spec: RowSpec, scratch: ScratchFile): PreparedRow {
  const bytesPerOp = spec.writeBytes * spec.writesPerOp
  const opsPerPass = Math.floor(scratch.regionBytes / bytesPerOp)
  if (opsPerPass < 1) throw new Error(`row ${spec.id}: ${bytesPerOp} bytes per op exceed the region`)
  const piecesPerPass = opsPerPass * spec.writesPerOp
  const windows = [0, sourceShiftBytes].map((shift) => {
    const pieces: Buffer[] = new Array(piecesPerPass)
    for (let j = 0; j < piecesPerPass; j++) pieces[j] = scratch.source.subarray(shift + j * spec.writeBytes, shift + (j + 1) * spec.writeBytes)
    return pieces
  })
  const [evenPass, oddPass] = windows as [Buffer[], Buffer[]]
  const { writesPerOp, writeBytes } = spec
  const regionStart = scratch.regionStartBytes
  const file = scratch.path

  if (spec.shape === 'write-fsync-close' || spec.shape === 'write-close-fsync') {
    const fsyncBeforeClose = spec.shape === 'write-fsync-close'
    const op = (i: number) => {
      const slot = i % opsPerPass
      const piece = (Math.floor(i / opsPerPass) & 1) === 0 ? evenPass[slot]! : oddPass[slot]!
      const fd = open(file, O.RDWR)
      pwriteAll(fd, piece, regionStart + slot * writeBytes)
      if (fsyncBeforeClose) fsync(fd)
      close(fd)
      // Open again in both variants, so that they differ only in which descriptor is synced.
      const other = open(file, O.RDWR)
      if (!fsyncBeforeClose) fsync(other)
      close(other)
    }
    return { kind: 'ready', op, release: () => {} }
  }

  // One op: its pieces back to back at the op's slot, each written with `write`; nothing else.
  const writePieces = (fd: number, i: number, write: (fd: number, piece: Buffer, offsetBytes: number) => void): void => {
    const slot = i % opsPerPass
    const pieces = (Math.floor(i / opsPerPass) & 1) === 0 ? evenPass : oddPass
    let j = slot * writesPerOp
    let offset = regionStart + j * writeBytes
    for (let k = 0; k < writesPerOp; k++, j++, offset += writeBytes) write(fd, pieces[j]!, offset)
  }
  const pwritev2Dsync = (fd: number, piece: Buffer, offsetBytes: number): void => pwritev2Sync(fd, piece, offsetBytes, RWF_DSYNC)

  let opOn: (fd: number) => (i: number) => void
  switch (spec.shape) {
    case 'sync-at-open':
    case 'write-only':
      opOn = (fd) => (i) => writePieces(fd, i, pwriteAll)
      break
    case 'write-then-sync': {
      const sync = spec.method === 'fsync' ? fsync : spec.method === 'fdatasync' ? fdatasync : null
      // fsync_writethrough has no Linux call; the registry marks it unavailable before we get here.
      if (sync === null) throw new Error(`row ${spec.id}: no sync call for ${spec.method} on this platform`)
      opOn = (fd) => (i) => {
        writePieces(fd, i, pwriteAll)
        sync(fd)
      }
      break
    }
    case 'pwritev2-dsync':
      opOn = (fd) => (i) => writePieces(fd, i, pwritev2Dsync)
      break
  }

  // The method's own flags (fcntl cannot add O_SYNC/O_DSYNC later, so they are set at open).
  const methodFlags = spec.shape === 'sync-at-open' ? methodImpls[spec.method === 'open_sync' ? 'open_sync' : 'open_datasync'].openFlags : 0
  let fd: number
  try {
    fd = open(file, O.RDWR | methodFlags | (spec.direct ? O.DIRECT : 0))
  } catch (error) {
    if (error instanceof NativeError) return { kind: 'open-failed', error }
    throw error
  }
  return { kind: 'ready', op: opOn(fd), release: () => close(fd) }
}
