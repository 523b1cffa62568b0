/**
 * The listener's metadata of a run, cross-checked against its data file's superblock before anything
 * is judged. Verify judges with the listener's copy (it is the authority on which run to judge, and
 * the file may be lost), but that copy can be damaged (a flipped bit in meta.msgpack) or wrong (a buggy
 * or hostile listener): a wrong slot count or record size would make an intact file FAIL. The
 * superblock is checksummed and was written by the writer from the same metadata it announced, so
 * when the file holds this very run, every field must agree. A disagreement is damage at the
 * listener, named field by field (exit 3), never a verdict on the storage.
 *
 * Only a superblock that is intact and names this run is compared: one that holds another run is a
 * lost file creation (judged: FAIL), and a damaged, zero or missing one leaves the listener's copy
 * as the only description (judged as before).
 */
import type { StoredRun } from '../../protocol/messages.js'
import type { RunMeta, SuperblockReading } from '../../record/format.js'
import { runtimeError } from '../../base/errors.js'

type Reading = SuperblockReading | { readonly kind: 'missing' | 'unreadable'; readonly detail: string }

/** Every field of a run's metadata, in the order the message names them. */
const fields: readonly (keyof RunMeta)[] = [
  'runId',
  'groupId',
  'member',
  'method',
  'direct',
  'pattern',
  'recordSizeBytes',
  'slotCount',
  'host',
  'path',
  'requestedPath',
  'createdMs',
]

/**
 * Fields the listener may lack while the file has them: added after protocol 3, so a listener of an
 * earlier version drops them from the announcement it stores. Verify then reads them from the file.
 */
const addedLater: ReadonlySet<keyof RunMeta> = new Set(['member'])

export interface FieldDisagreement {
  readonly field: string
  readonly listener: string
  readonly file: string
}

/** The fields on which the listener's copy and the superblock's disagree; [] when they agree. */
export function disagreements(listener: RunMeta, file: RunMeta): FieldDisagreement[] {
  const found: FieldDisagreement[] = []
  const known = new Set<string>(fields)
  const extra = [...Object.keys(listener), ...Object.keys(file)].filter((k) => !known.has(k)) as (keyof RunMeta)[]
  for (const field of [...fields, ...new Set(extra)]) {
    const a = listener[field]
    const b = file[field]
    if (a === undefined && addedLater.has(field)) continue
    if (shown(a) !== shown(b)) found.push({ field, listener: shown(a), file: shown(b) })
  }
  return found
}

function shown(value: unknown): string {
  return value === undefined ? 'absent' : JSON.stringify(value)
}

/**
 * A data file's path is the path given to --file, then .method with several methods, then .jobK with
 * several jobs: anything else (a damaged path at the listener would send verify to a file that does
 * not exist, and call every record lost) is damage. Runs carrying their place in the group are held
 * to it exactly by runMetaSchema; older runs to the shape.
 */
export function pathFitsLayout(meta: Pick<RunMeta, 'path' | 'requestedPath' | 'method'>): boolean {
  // meta.method is one of methodNames (runMetaSchema): letters, digits and underscores only.
  return (
    meta.path.startsWith(meta.requestedPath) &&
    new RegExp(`^(\\.${meta.method})?(\\.job[1-9][0-9]?)?$`).test(meta.path.slice(meta.requestedPath.length))
  )
}

/**
 * Throws (exit 3) at the first run whose listener metadata disagrees with the superblock of the file
 * that holds it, or whose path is not one a write makes for the path it was given. metaFileOf names the listener's file of a run, when verify reads the directory itself.
 */
export function checkMetaAgainstFiles(
  runs: readonly StoredRun[],
  superblockAt: (path: string) => Reading,
  source: string,
  metaFileOf?: (runId: string) => string,
): void {
  for (const run of runs) {
    if (!pathFitsLayout(run.meta)) {
      throw runtimeError(
        `the ${source} describes run ${run.meta.runId} (${run.meta.method}) with the data file ${run.meta.path}, which no write of ${run.meta.requestedPath} makes; nothing was judged`,
        `${metaFileOf === undefined ? `the listener's copy (runs/${run.meta.runId}/meta.msgpack in its --dir)` : metaFileOf(run.meta.runId)} is damaged, or the listener answered wrong: restore the listener's directory from a good copy, then verify again`,
      )
    }
    const reading = superblockAt(run.meta.path)
    if (reading.kind !== 'valid' || reading.meta.runId !== run.meta.runId) continue
    const differ = disagreements(run.meta, reading.meta)
    if (differ.length === 0) continue
    const listed = differ.map((d) => `${d.field} is ${d.listener} at the listener, ${d.file} in the file`).join('; ')
    const where =
      metaFileOf === undefined ? `the listener's copy (runs/${run.meta.runId}/meta.msgpack in its --dir)` : metaFileOf(run.meta.runId)
    throw runtimeError(
      `the ${source} describes run ${run.meta.runId} otherwise than the checksummed superblock of its data file ${run.meta.path}: ${listed}; nothing was judged`,
      `${where} is damaged, or the listener answered wrong: the storage under test is not to blame; restore the listener's directory from a good copy, then verify again`,
    )
  }
}
