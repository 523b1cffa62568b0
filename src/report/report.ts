/**
 * `plugcheck report`: a campaign's report from a listener's directory (read only): per cycle, per
 * method over the campaign, the `none` control's detection rate, the device under test; several
 * campaigns side by side; then the runs outside campaigns, with their stored verdicts. Text for people, --json for programs (one document, validated against
 * reportDocumentSchema before it is printed), --html for a self-contained file with a timeline per cycle.
 *
 * Exit codes: 0 the report was produced (whatever its verdicts say: it reports, it does not judge),
 * 2 an unknown campaign, a directory that is not a listener's or one with neither campaigns nor runs, 3 damage on disk or a failed write.
 */
import { closeSync, fsyncSync, lstatSync, openSync, readSync, renameSync, unlinkSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { describeSystemError, exitCodes, runtimeError, usageError } from '../base/errors.js'
import type { Io } from '../base/io.js'
import { loadListenerDir, storeRecords, type RecordSource } from './load.js'
import { buildCampaign, buildPlainRuns } from './model.js'
import { reportDocumentSchema, reportFormatVersion, type ReportDocument } from './schema.js'
import { renderText } from './text.js'
import { renderHtml, reportGenerator } from './html.js'

export interface ReportOptions {
  /** The listener's --dir. */
  readonly dir: string
  /** Campaign names; all campaigns in the directory when absent. */
  readonly campaigns?: readonly string[]
  readonly json: boolean
  readonly htmlFile?: string
}

export async function runReport(options: ReportOptions, io: Io, source: RecordSource = storeRecords): Promise<number> {
  const { records, warnings, campaigns } = await loadListenerDir(options.dir, options.campaigns, source)
  const built = campaigns.map((campaign) => buildCampaign(campaign, records))
  const doc: ReportDocument = reportDocumentSchema.parse({
    tool: 'plugcheck report',
    formatVersion: reportFormatVersion,
    dir: options.dir,
    campaigns: built.map((b) => b.report),
    // Named campaigns are what was asked for; without names, the runs outside campaigns too.
    plainRuns: options.campaigns === undefined ? buildPlainRuns(records) : [],
    warnings: [...warnings],
  })
  if (options.htmlFile !== undefined) writeReportFile(options.htmlFile, renderHtml(doc, built))
  io.out(options.json ? `${JSON.stringify(doc, null, 2)}\n` : renderText(doc))
  return exitCodes.ok
}

/**
 * Writes the HTML report. A path that holds anything but an earlier plugcheck report (a user's file,
 * the listener's own state, a FIFO, a device, a directory) is refused, never overwritten; the file is
 * written under a temporary name and renamed into place, so a failure leaves the old one.
 */
function writeReportFile(path: string, html: string): void {
  let stats
  try {
    stats = lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw runtimeError(`could not inspect ${path}: ${describeSystemError(error)}`)
  }
  if (stats !== undefined) {
    if (!stats.isFile()) throw runtimeError(`could not write the report to ${path}: it is not a regular file`, 'give --html a file name')
    if (!isOurReport(path)) {
      throw usageError(
        `refusing to overwrite ${path}: it is not a plugcheck report`,
        'give --html a new file name (an earlier report of plugcheck is replaced)',
      )
    }
  }
  const tmp = join(dirname(path), `.${basename(path)}.plugcheck-${randomBytes(6).toString('hex')}.tmp`)
  try {
    writeFileSync(tmp, html, { flag: 'wx' })
    const fd = openSync(tmp, 'r')
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(tmp, path)
  } catch (error) {
    try {
      unlinkSync(tmp)
    } catch {
      // never created
    }
    throw runtimeError(`could not write ${path}: ${describeSystemError(error)}`)
  }
}

/** The file's head carries the generator mark renderHtml writes. */
function isOurReport(path: string): boolean {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return false
  }
  try {
    const head = Buffer.alloc(1024)
    const n = readSync(fd, head, 0, head.length, 0)
    return head.subarray(0, n).toString('utf8').includes(`<meta name="generator" content="${reportGenerator}">`)
  } finally {
    closeSync(fd)
  }
}
