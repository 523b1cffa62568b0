/**
 * `plugcheck report`: a campaign's report from a listener's directory (read only): per cycle, per
 * method over the campaign, the `none` control's detection rate, the device under test; several
 * campaigns side by side. Text for people, --json for programs (one document, validated against
 * reportDocumentSchema before it is printed), --html for a self-contained file with a timeline per cycle.
 *
 * Exit codes: 0 the report was produced (whatever its verdicts say: it reports, it does not judge),
 * 2 an unknown campaign or a directory that is not a listener's, 3 damage on disk or a failed write.
 */
import { writeFileSync } from 'node:fs'
import { describeSystemError, exitCodes, runtimeError } from '../errors.js'
import type { Io } from '../client/writer.js'
import { loadListenerDir, storeRecords, type RecordSource } from './load.js'
import { buildCampaign, reportDocumentSchema, reportFormatVersion, type ReportDocument } from './model.js'
import { renderText } from './text.js'
import { renderHtml } from './html.js'

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
    warnings: [...warnings],
  })
  if (options.htmlFile !== undefined) {
    try {
      writeFileSync(options.htmlFile, renderHtml(doc, built))
    } catch (error) {
      throw runtimeError(`could not write ${options.htmlFile}: ${describeSystemError(error)}`)
    }
  }
  io.out(options.json ? `${JSON.stringify(doc, null, 2)}\n` : renderText(doc))
  return exitCodes.ok
}
