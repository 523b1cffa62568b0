/**
 * plugcheck bench: pg_test_fsync's tables, measured the same way, with the environment they were
 * measured in and a judgement of which figures are too good to be true.
 *
 * Order of work (the table of contents, as in pg_test_fsync's main()): make the scratch file,
 * fingerprint the storage, run each section's rows, judge plausibility, print, remove the file.
 * A row the platform lacks is "n/a" with the registry's reason; a row the file system refuses
 * (O_DIRECT) is "n/a*" with a footnote. A failed write or sync stops the run (exit 3): a failed
 * fsync is never retried or ignored.
 */
import type { Io } from '../base/io.js'
import { describeSystemError, exitCodes, runtimeError } from '../base/errors.js'
import { NativeError, nativePort } from '../native/index.js'
import { fsyncSync } from 'node:fs'
import { methodAvailability } from '../native/registry.js'
import { collectFingerprint } from '../env/fingerprint.js'
import { assessPlausibility } from './plausibility.js'
import {
  renderFlags,
  renderFootnotes,
  renderHeader,
  type PlatformFacts,
  renderRowFigures,
  renderRowLabel,
  renderSectionTitle,
} from './report/render.js'
import { benchFormatVersion, type BenchReport, type RowResult, type SectionResult } from './schema.js'
import type { Fingerprint } from '../env/fingerprint-schema.js'
import {
  BenchInterrupted,
  createScratchFile,
  fillScratchFile,
  guardScratchFile,
  removeScratchFile,
  type ScratchFile,
} from './scratch-file.js'
import { measure } from './sections/measure.js'
import { describeCalls, prepareRow } from './sections/ops.js'
import { benchPlan, type RowSpec } from './sections/plan.js'
import { benchProgress } from './progress.js'

export interface BenchOptions {
  /** A file path, a directory to create the scratch file in, or undefined for the current directory. */
  readonly file?: string
  readonly secsPerTest: number
  readonly recordSizeBytes: number
  readonly json: boolean
}

/** pg_test_fsync's footnote for a row whose open (or write) the file system refused. */
const directIoFootnote = '* This file system and its mount options do not support direct I/O for these writes, e.g. ext4 in journaled mode.'
/** O_DIRECT needs every write to be a multiple of the logical block; assume the common one when sysfs is silent. */
const assumedLogicalBlockBytes = 512

function notRun(spec: RowSpec, status: 'n/a' | 'n/a*', reason: string): RowResult {
  return {
    ...rowIdentity(spec),
    status,
    reason,
    opCount: null,
    elapsedS: null,
    opsPerSec: null,
    usecsPerOp: null,
    latencyUsP50: null,
    latencyUsP99: null,
    latencyUsMax: null,
  }
}

function rowIdentity(spec: RowSpec) {
  return {
    id: spec.id,
    label: spec.label,
    method: spec.method,
    direct: spec.direct,
    durable: spec.durable,
    writesPerOp: spec.writesPerOp,
    writeBytes: spec.writeBytes,
    calls: describeCalls(spec),
  }
}

/**
 * Every test starts from the same state: nothing dirty (flushed, so this test pays only for its own
 * writes) and nothing of the file cached. The second matters as much: the preparation's sequential
 * 16 MiB write leaves large folios in the page cache, and on recent kernels a small buffered write
 * into a large folio costs several times one into a small folio, so the first buffered tests would
 * measure the page cache's history rather than the method.
 */
function settle(scratch: ScratchFile): void {
  fsyncSync(scratch.controlFd)
  nativePort().dropCache(scratch.path) // where the OS can; elsewhere the cache keeps what it has
}

/** One row, settled and measured, exactly as the bench runs it (exported for bench/pg-test-fsync-ratio.ts). */
export async function runRow(
  spec: RowSpec,
  scratch: ScratchFile,
  fingerprint: Fingerprint,
  secsPerTest: number,
  stopRequested: () => Error | null,
): Promise<RowResult> {
  const availability = methodAvailability(spec.method)
  if (!availability.available) return notRun(spec, 'n/a', availability.reason)
  const logicalBlockBytes = fingerprint.device?.logicalBlockBytes ?? assumedLogicalBlockBytes
  if (spec.direct && spec.writeBytes % logicalBlockBytes !== 0) {
    return notRun(
      spec,
      'n/a*',
      `O_DIRECT needs writes in multiples of the ${logicalBlockBytes}-byte logical block, not ${spec.writeBytes} bytes`,
    )
  }
  const prepared = prepareRow(spec, scratch)
  if (prepared.kind === 'open-failed') return notRun(spec, 'n/a*', `open failed: ${describeSystemError(prepared.error)}`)
  try {
    settle(scratch)
    const measurement = await measure(prepared.op, secsPerTest, stopRequested)
    return { ...rowIdentity(spec), status: 'ok', reason: null, ...measurement }
  } catch (error) {
    // A file system may accept O_DIRECT at open and refuse a write size (e.g. XFS with 4 KiB sectors).
    if (
      spec.direct &&
      error instanceof NativeError &&
      error.code === 'EINVAL' &&
      (error.syscall === 'pwrite' || error.syscall === 'WriteFile')
    ) {
      return notRun(spec, 'n/a*', `write failed: ${describeSystemError(error)}`)
    }
    throw error
  } finally {
    prepared.release()
  }
}

function platformFacts(): PlatformFacts {
  const table = nativePort().table()
  return {
    name: table.name,
    direct: table.direct.applies ? table.direct.how : `n/a: ${table.direct.reason}`,
    caveats: [
      ...table.methods.filter((m) => m.available && m.caveat !== undefined && m.name !== 'none').map((m) => `${m.name}: ${m.caveat}`),
      ...table.notes,
    ],
  }
}

export async function runBench(options: BenchOptions, io: Io): Promise<number> {
  const scratch = createScratchFile(options.file)
  const guard = guardScratchFile(scratch)
  const stopRequested = () => {
    const signal = guard.interruptedBy()
    return signal === null ? null : new BenchInterrupted(signal)
  }
  const plan = benchPlan(options.recordSizeBytes)
  const progress = benchProgress(io, plan, options.secsPerTest, (row) => methodAvailability(row.method).available)
  const print = (text: string) => {
    if (!options.json) progress.out(text)
  }
  try {
    fillScratchFile(scratch)
    const fingerprint = collectFingerprint(scratch.path, nativePort().fileSystemOf(scratch.path))
    print(renderHeader(fingerprint, options.secsPerTest, options.recordSizeBytes, platformFacts()))
    const sections: SectionResult[] = []
    const footnotes = new Set<string>()
    for (const section of plan) {
      print(renderSectionTitle(section.title))
      const rows: RowResult[] = []
      for (const spec of section.rows) {
        progress.rowStarted(section, spec)
        print(renderRowLabel(spec.label))
        const row = await runRow(spec, scratch, fingerprint, options.secsPerTest, stopRequested)
        print(renderRowFigures(row))
        rows.push(row)
      }
      if (rows.some((row) => row.status === 'n/a*')) {
        print(renderFootnotes([directIoFootnote]))
        footnotes.add(directIoFootnote)
      }
      sections.push({ id: section.id, title: section.title, rows })
    }
    progress.end()
    const flags = assessPlausibility(sections, fingerprint)
    if (options.json) {
      const report: BenchReport = {
        tool: 'plugcheck bench',
        formatVersion: benchFormatVersion,
        secsPerTest: options.secsPerTest,
        recordSizeBytes: options.recordSizeBytes,
        file: scratch.path,
        fingerprint,
        sections,
        flags,
        footnotes: [...footnotes],
      }
      io.out(`${JSON.stringify(report, null, 2)}\n`)
    } else {
      print(renderFlags(flags, sections))
    }
    return exitCodes.ok
  } catch (error) {
    if (error instanceof BenchInterrupted) {
      print('\n')
      throw runtimeError(`${error.message}; removed ${scratch.path}`)
    }
    if (error instanceof NativeError) {
      print('\n')
      const hint = /sync|flush|pwritev2/i.test(error.syscall)
        ? 'a failed sync is never retried: the kernel may already have dropped the data it could not write'
        : undefined
      throw runtimeError(`${error.syscall} failed on ${scratch.path}: ${describeSystemError(error)}`, hint)
    }
    throw error
  } finally {
    progress.end()
    removeScratchFile(scratch)
    guard.dispose()
  }
}
