/**
 * Write rate: records/s of `plugcheck write --method fdatasync` against a C loop doing the same
 * 8 KiB pwrite + fdatasync, on an ext4 directory and on tmpfs (/dev/shm, where syncs cost ~nothing,
 * so the figure is pure tool overhead).
 *
 * Fairness: both sides create a fresh file of the same size (a 64 MiB region written with zeros and
 * fsynced first), then overwrite 8 KiB slots in place, picking the slot for seq n with plugcheck's
 * own overwrite hash under a random run key; one pwrite + one fdatasync per record. The runs are
 * interleaved (C, plugcheck, C, plugcheck, ...) so drift in a shared, noisy machine hits both sides
 * alike, and the ratio is the median of the per-round ratios.
 *
 * plugcheck's rate is records in its summary / --duration (its loop checks the clock every 50 ms,
 * so it may run up to 50 ms longer: at 4 s that flatters it by at most ~1%). The C rate is records /
 * its own measured loop time. The listener runs as a separate process on 127.0.0.1 with its store on
 * tmpfs: in real use it lives on another machine, so its group-commit fdatasyncs must not queue on
 * the disk under test.
 *
 * Usage: node --import tsx bench/write-rate.ts [--dir DIR] [--rounds N] [--seconds S] [--targets disk,tmpfs]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createServer, type AddressInfo } from 'node:net'
import { parseArgs } from 'node:util'
import {
  buildSyncLoop,
  dataFileSizeBytes,
  fileSystemName,
  formatRate,
  median,
  plugcheckWriteArgs,
  recordSizeBytes,
  recordsFromSummary,
  roundsAndSeconds,
  runChild,
  runSyncLoop,
  startListenerProcess,
  table,
  tmpfsDir,
} from './common.js'

/** Goals: plugcheck/C rate ratio per kind of target. */
const goalRatioExt4 = 0.95
const goalRatioTmpfs = 0.5

interface Round {
  readonly cPerS: number
  /** The C loop plus one blocking 51-byte loopback send per record: the ceiling for a writer that sends each ack itself before its next record. */
  readonly cSendPerS: number
  readonly plugcheckPerS: number
}

interface TargetResult {
  readonly label: string
  readonly dir: string
  readonly fileSystem: string
  readonly rounds: Round[]
  readonly goalRatio: number
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', default: tmpdir() },
      rounds: { type: 'string', default: '5' },
      seconds: { type: 'string', default: '4' },
      targets: { type: 'string', default: 'disk,tmpfs' },
    },
  })
  const { roundCount, durationS } = roundsAndSeconds(values)

  const work = mkdtempSync(join(tmpdir(), 'plugcheck-bench-'))
  const storeDir = mkdtempSync(join(tmpfsDir, 'plugcheck-bench-store-'))
  const cBinary = await buildSyncLoop(work)

  const listener = await startListenerProcess(storeDir)
  // Where the C loop's acks go: a loopback peer that reads and discards, as cheap as a receiver can be.
  const sink = createServer((socket) => socket.resume().on('error', () => socket.destroy()))
  await new Promise<void>((resolveListen) => sink.listen(0, '127.0.0.1', resolveListen))
  const sinkPort = (sink.address() as AddressInfo).port
  const results: TargetResult[] = []
  try {
    const wanted = new Set(values.targets.split(','))
    const targets = [
      { label: 'disk', dir: resolve(values.dir), goalRatio: goalRatioExt4 },
      { label: 'tmpfs', dir: tmpfsDir, goalRatio: goalRatioTmpfs },
    ].filter((t) => wanted.has(t.label))
    for (const target of targets) {
      const fileSystem = fileSystemName(target.dir)
      console.log(`${target.label}: ${target.dir} (${fileSystem}), ${roundCount} rounds of ${durationS} s per side`)
      const rounds: Round[] = []
      for (let r = 0; r < roundCount; r++) {
        const cFile = join(target.dir, `plugcheck-bench-c-${process.pid}.dat`)
        const cPerS = await runC(cBinary, cFile, durationS)
        const cSendPerS = await runC(cBinary, cFile, durationS, sinkPort)
        const plugcheckPerS = await runPlugcheck(listener.port, join(target.dir, `plugcheck-bench-pc-${process.pid}.dat`), durationS)
        rounds.push({ cPerS, cSendPerS, plugcheckPerS })
        console.log(
          `  round ${r + 1}: C ${formatRate(cPerS)}, C+send ${formatRate(cSendPerS)}, plugcheck ${formatRate(plugcheckPerS)}, ratio ${(plugcheckPerS / cPerS).toFixed(3)}`,
        )
      }
      results.push({ ...target, fileSystem, rounds })
    }
  } finally {
    sink.close()
    await listener.stop()
    rmSync(work, { recursive: true, force: true })
    rmSync(storeDir, { recursive: true, force: true })
  }

  console.log(
    `\nfdatasync, ${recordSizeBytes / 1024} KiB records overwriting a ${dataFileSizeBytes / 1024 ** 2} MiB region; medians over rounds`,
  )
  const rows = [['target', 'C', 'C+send/C', 'plugcheck', 'plugcheck/C', 'ratio range', 'goal', 'met']]
  for (const t of results) {
    const ratios = t.rounds.map((r) => r.plugcheckPerS / r.cPerS)
    const ratio = median(ratios)
    rows.push([
      `${t.label} (${t.fileSystem})`,
      formatRate(median(t.rounds.map((r) => r.cPerS))),
      median(t.rounds.map((r) => r.cSendPerS / r.cPerS)).toFixed(3),
      formatRate(median(t.rounds.map((r) => r.plugcheckPerS))),
      ratio.toFixed(3),
      `${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}`,
      `>= ${t.goalRatio}`,
      ratio >= t.goalRatio ? 'yes' : 'no',
    ])
  }
  console.log(table(rows))
  return 0
}

async function runC(binary: string, file: string, durationS: number, ackPort?: number): Promise<number> {
  try {
    return await runSyncLoop(binary, file, durationS, ackPort)
  } finally {
    rmSync(file, { force: true })
  }
}

async function runPlugcheck(port: number, file: string, durationS: number): Promise<number> {
  try {
    const result = await runChild(process.execPath, plugcheckWriteArgs(port, file, durationS))
    if (result.code !== 0) throw new Error(`plugcheck write failed (code ${result.code}):\n${result.stdout}${result.stderr}`)
    return recordsFromSummary(result.stdout) / durationS
  } finally {
    rmSync(file, { force: true })
  }
}

process.exitCode = await main()
