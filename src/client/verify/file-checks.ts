/**
 * Checks on the machine under test before a run is judged, so that verify never blames the storage
 * for what the operator's setup did: a data file whose file system is not mounted (after a reboot the
 * path then leads to an empty directory on another file system, or nowhere). It is an operating error
 * (exit 3) naming the cause, never a verdict. (A group's missing members: group-members.ts.)
 */
import { existsSync, realpathSync, readFileSync, statSync } from 'node:fs'
import { hostname } from 'node:os'
import { dirname } from 'node:path'
import { findMount, parseMountInfo, splitDeviceNumber } from '../../env/fingerprint.js'
import type { StoredRun } from '../../protocol/messages.js'
import { runtimeError } from '../../base/errors.js'

/** The data file's directory must exist, and on the writer's machine be on the file system the writer used. */
export function checkFileSystemPresent(run: StoredRun): void {
  const dir = dirname(run.meta.path)
  if (!existsSync(dir)) {
    throw runtimeError(
      `the directory ${dir} of run ${run.meta.runId}'s data file does not exist: is its file system mounted?`,
      'mount the file system under test (or verify on the machine that has it), then run verify again',
    )
  }
  const written = run.writer?.fingerprint?.target.fileSystem
  if (written?.mountPoint == null || run.meta.host !== hostname()) return
  const now = mountOf(dir)
  if (now === null || now.mountPoint === written.mountPoint) return
  throw runtimeError(
    `run ${run.meta.runId} was written on the file system mounted at ${written.mountPoint} (${written.type}${written.source === null ? '' : ` on ${written.source}`}), but ${dir} is now on the one mounted at ${now.mountPoint} (${now.fsType} on ${now.source})`,
    `mount the file system under test at ${written.mountPoint}, then run verify again`,
  )
}

function mountOf(path: string): { mountPoint: string; fsType: string; source: string } | null {
  try {
    const { major, minor } = splitDeviceNumber(statSync(path, { bigint: true }).dev)
    const entry = findMount(parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8')), major, minor, realpathSync(path))
    return entry === null ? null : { mountPoint: entry.mountPoint, fsType: entry.fsType, source: entry.source }
  } catch {
    return null // no /proc (not Linux): nothing to compare
  }
}
