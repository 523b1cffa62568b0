/**
 * A files run's directory on Windows (record/files-layout.ts): record files created with CreateFileW
 * (CREATE_NEW, the method's flags), published with MoveFileExW(MOVEFILE_REPLACE_EXISTING |
 * MOVEFILE_WRITE_THROUGH) or CreateHardLinkW then DeleteFileW, deleted with DeleteFileW.
 *
 * Windows has no directory sync (index.ts says why): sync() does nothing, and `plugcheck methods` says
 * so (methods.ts directorySyncs.windows). MOVEFILE_WRITE_THROUGH makes MoveFileExW return only once the
 * move is on the disk; a hard link and a delete have no such flag, so with --publish link nothing asks
 * for the new name to be durable: the run tests what NTFS's journal keeps by itself.
 */
import { win32 as win32Path } from 'node:path'
import type { MethodName } from '../methods.js'
import type { RecordDirectory } from '../port.js'
import { namespaced, openData } from './file.js'
import { api, CREATE_NEW, failLast, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH } from './win32.js'

export function openRecordDirectory(path: string, method: MethodName, direct: boolean): RecordDirectory {
  const w = api()
  const at = (name: string): string => win32Path.join(path, name)
  return {
    create(name) {
      return openData(at(name), method, direct, CREATE_NEW)
    },
    rename(from, to) {
      const ok = Number(w.MoveFileExW(namespaced(at(from)), namespaced(at(to)), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
      if (ok === 0) failLast('MoveFileExW', at(from))
    },
    link(from, to) {
      if (Number(w.CreateHardLinkW(namespaced(at(to)), namespaced(at(from)), null)) === 0) failLast('CreateHardLinkW', at(to))
    },
    unlink(name) {
      if (Number(w.DeleteFileW(namespaced(at(name)))) === 0) failLast('DeleteFileW', at(name))
    },
    sync() {
      // Windows cannot flush a directory (index.ts directorySync): nothing to call.
    },
    close() {
      // No handle of the directory is held: every call names its file by path.
    },
  }
}
