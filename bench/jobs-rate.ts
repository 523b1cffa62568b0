/**
 * Jobs rate: records/s of `plugcheck write --jobs N` (N writer threads, one file each) for several N,
 * on tmpfs (/dev/shm: syncs cost ~nothing, so the figure is the tool's own cost per record and how it
 * spreads over cores) and on a directory of the root file system (a real device's flushes, where a
 * queue deeper than one may let syncs overlap).
 *
 * Same workload as bench/write-rate.ts per job (fdatasync, 8 KiB records overwriting a 64 MiB
 * region). Rounds are interleaved (--jobs 1, 2, 4, 1, 2, 4, ...) so drift on a shared machine hits
 * every N alike; the figure is the median over rounds, with the spread (min-max) beside it, and the
 * ratio to --jobs 1 is the median of the per-round ratios. The rate is the records in the summaries
 * (all jobs) / --duration. The listener is a separate process on 127.0.0.1 with its store on tmpfs.
 *
 * Usage: node --import tsx bench/jobs-rate.ts [--dir DIR] [--rounds N] [--seconds S] [--jobs 1,2,4] [--targets tmpfs,disk]
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import {
  fileSystemName,
  formatRate,
  median,
  plugcheckWriteArgs,
  roundsAndSeconds,
  runChild,
  startListenerProcess,
  table,
  tmpfsDir,
} from './common.js'

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: resolve('.') },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '3' },
    jobs: { type: 'string', default: '1,2,4' },
    targets: { type: 'string', default: 'tmpfs,disk' },
  },
})
const { roundCount, durationS } = roundsAndSeconds(values)
const jobCounts = values.jobs.split(',').map(Number)
if (!jobCounts.every((n) => Number.isInteger(n) && n >= 1 && n <= 64)) throw new Error('--jobs takes a comma list of 1..64')
const targets = values.targets.split(',').map((t) => (t === 'tmpfs' ? tmpfsDir : t === 'disk' ? values.dir : t))

/** Records of every run in a `write --jobs N` summary. */
function recordsOfAllJobs(stdout: string): number {
  const counts = [...stdout.matchAll(/([\d,]+) records synced and acknowledged/g)].map((m) => Number(m[1]!.replaceAll(',', '')))
  if (counts.length === 0) throw new Error(`no record count in plugcheck's summary:\n${stdout}`)
  return counts.reduce((a, b) => a + b, 0)
}

const storeDir = mkdtempSync(join(tmpfsDir, 'plugcheck-jobs-bench-store-'))
const listener = await startListenerProcess(storeDir)
try {
  console.log(
    `jobs-rate: ${roundCount} rounds x ${durationS} s, jobs ${jobCounts.join(', ')}, ${cpus().length} cores, listener store on ${tmpfsDir}`,
  )
  for (const target of targets) {
    const workDir = mkdtempSync(join(target, 'plugcheck-jobs-bench-'))
    const rates = new Map<number, number[]>(jobCounts.map((n) => [n, []]))
    try {
      for (let round = 0; round < roundCount; round++) {
        for (const n of jobCounts) {
          const file = join(workDir, `data-${n}`)
          const result = await runChild(process.execPath, plugcheckWriteArgs(listener.port, file, durationS, ['--jobs', String(n)]))
          if (result.code !== 0) throw new Error(`plugcheck write --jobs ${n} exited ${result.code}: ${result.stderr}`)
          rates.get(n)!.push(recordsOfAllJobs(result.stdout) / durationS)
        }
      }
    } finally {
      rmSync(workDir, { recursive: true, force: true })
    }
    const base = rates.get(jobCounts[0]!)!
    const rows = [['jobs', 'records/s (median)', 'min-max', `ratio to --jobs ${jobCounts[0]} (median of rounds)`]]
    for (const n of jobCounts) {
      const r = rates.get(n)!
      const ratios = r.map((x, i) => x / base[i]!)
      rows.push([
        String(n),
        formatRate(median(r)),
        `${formatRate(Math.min(...r))}-${formatRate(Math.max(...r))}`,
        median(ratios).toFixed(2),
      ])
    }
    console.log(`\n${target} (${fileSystemName(target)})\n${table(rows)}`)
  }
} finally {
  await listener.stop()
  rmSync(storeDir, { recursive: true, force: true })
}
