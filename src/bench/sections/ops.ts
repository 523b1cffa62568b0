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
import { NativeError, directorySyncText, directorySyncs, nativePort, type DataFile, type RecordDirectory } from '../../native/index.js'
import { methodRow } from '../../native/registry.js'
import { recordFileName, recycledBy, tempFileName } from '../../record/files-layout.js'
import { prepareFilesDirectory, sourceShiftBytes, type ScratchFile } from '../scratch-file.js'
import { metadataKeptFiles, type RowSpec } from './plan.js'

export type PreparedRow =
  | { readonly kind: 'ready'; readonly op: (opIndex: number) => void; readonly release: () => void }
  | { readonly kind: 'open-failed'; readonly error: NativeError }

/** The calls of one op, from the platform's method table, for people and for the JSON. */
export function describeCalls(spec: RowSpec): string {
  const times = spec.writesPerOp === 1 ? '' : ` (${spec.writesPerOp} writes)`
  const direct = spec.direct ? `, direct I/O (${directHow()})` : ''
  switch (spec.shape) {
    case 'sync-at-open':
    case 'write-then-sync':
    case 'pwritev2-dsync':
    case 'write-only':
      return `${methodRow(spec.method).calls}${times}${direct}`
    case 'write-fsync-close':
      return `open, ${methodRow('fsync').calls}, close, open, close`
    case 'write-close-fsync':
      return `open, ${methodRow('none').calls}, close, open, ${methodRow('fsync').calls.split(', ').slice(1).join(', ')}, close`
    case 'create-rename':
      return `create (O_EXCL), ${methodRow(spec.method).calls}, close, rename, unlink of the file ${metadataKeptFiles} back, directory: ${directorySyncText[directorySyncs[nativePort().family][spec.method]]}`
  }
}

function directHow(): string {
  const direct = nativePort().table().direct
  return direct.applies ? direct.how.split(':')[0]! : 'n/a'
}

/** Opens what the row needs and returns its op; release() closes it. */
export function prepareRow(spec: RowSpec, scratch: ScratchFile): PreparedRow {
  const bytesPerOp = spec.writeBytes * spec.writesPerOp
  const opsPerPass = Math.floor(scratch.regionBytes / bytesPerOp)
  if (opsPerPass < 1) throw new Error(`row ${spec.id}: ${bytesPerOp} bytes per op exceed the region`)
  const piecesPerPass = opsPerPass * spec.writesPerOp
  const windows = [0, sourceShiftBytes].map((shift) => {
    const pieces: Buffer[] = new Array(piecesPerPass)
    for (let j = 0; j < piecesPerPass; j++)
      pieces[j] = scratch.source.subarray(shift + j * spec.writeBytes, shift + (j + 1) * spec.writeBytes)
    return pieces
  })
  const [evenPass, oddPass] = windows as [Buffer[], Buffer[]]
  const { writesPerOp, writeBytes } = spec
  const regionStart = scratch.regionStartBytes
  const file = scratch.path
  const port = nativePort()

  if (spec.shape === 'create-rename') return prepareCreateRename(spec, scratch, evenPass, oddPass, opsPerPass)

  if (spec.shape === 'write-fsync-close' || spec.shape === 'write-close-fsync') {
    const fsyncBeforeClose = spec.shape === 'write-fsync-close'
    const op = (i: number) => {
      const slot = i % opsPerPass
      const piece = (Math.floor(i / opsPerPass) & 1) === 0 ? evenPass[slot]! : oddPass[slot]!
      const writer = port.openData(file, fsyncBeforeClose ? 'fsync' : 'none', { direct: false })
      writer.write(piece, regionStart + slot * writeBytes)
      if (fsyncBeforeClose) writer.sync()
      writer.close()
      // Open again in both variants, so that they differ only in which descriptor is synced.
      const other = port.openData(file, 'fsync', { direct: false })
      if (!fsyncBeforeClose) other.sync()
      other.close()
    }
    return { kind: 'ready', op, release: () => {} }
  }

  // One op: its pieces back to back at the op's slot, each written with the method's write, then the
  // method's sync (none for the methods that sync at open or per write, and for plain writes).
  let data: DataFile
  try {
    data = port.openData(file, spec.method, { direct: spec.direct })
  } catch (error) {
    if (error instanceof NativeError) return { kind: 'open-failed', error }
    throw error
  }
  const op = (i: number): void => {
    const slot = i % opsPerPass
    const pieces = (Math.floor(i / opsPerPass) & 1) === 0 ? evenPass : oddPass
    let j = slot * writesPerOp
    let offset = regionStart + j * writeBytes
    for (let k = 0; k < writesPerOp; k++, j++, offset += writeBytes) data.write(pieces[j]!, offset)
    data.sync()
  }
  return { kind: 'ready', op, release: () => data.close() }
}

/**
 * write --pattern files' record as one op (writeRecordFile in client/write/writer.ts, the same calls
 * through the same port): op i makes rec-(i+1) in the scratch directory and deletes the one
 * metadataKeptFiles back, so the directory stays small and every op creates, renames and deletes.
 */
function prepareCreateRename(spec: RowSpec, scratch: ScratchFile, evenPass: Buffer[], oddPass: Buffer[], opsPerPass: number): PreparedRow {
  prepareFilesDirectory(scratch)
  let directory: RecordDirectory
  try {
    directory = nativePort().openRecordDirectory(scratch.filesDirectory, spec.method, { direct: spec.direct })
  } catch (error) {
    if (error instanceof NativeError) return { kind: 'open-failed', error }
    throw error
  }
  const op = (i: number): void => {
    const slot = i % opsPerPass
    const piece = (Math.floor(i / opsPerPass) & 1) === 0 ? evenPass[slot]! : oddPass[slot]!
    const seq = i + 1
    const tmp = tempFileName(seq)
    const file = directory.create(tmp)
    try {
      file.write(piece, 0)
      file.sync()
    } finally {
      file.close()
    }
    directory.rename(tmp, recordFileName(seq))
    const recycled = recycledBy(seq, metadataKeptFiles)
    if (recycled !== null) directory.unlink(recordFileName(recycled))
    directory.sync()
  }
  return { kind: 'ready', op, release: () => directory.close() }
}
