/**
 * Making a directory's entries durable after a create or a rename: fsync on the directory, where the
 * OS has it (not Windows, whose file systems journal renames and cannot flush a directory handle).
 */
import { closeSync, fsync, fsyncSync, openSync } from 'node:fs'
import { promisify } from 'node:util'
import { nativePort } from '../native/index.js'

const fsyncAsync = promisify(fsync)

export function syncDirectory(dir: string): void {
  if (!nativePort().directorySync.supported) return
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** The same, with the fsync off the event loop (the listener's path). */
export async function syncDirectoryAsync(dir: string): Promise<void> {
  if (!nativePort().directorySync.supported) return
  const fd = openSync(dir, 'r')
  try {
    await fsyncAsync(fd)
  } finally {
    closeSync(fd)
  }
}
