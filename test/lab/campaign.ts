/**
 * The power-cut campaign: `npm run lab -- --cuts N [--disk honest,lying] [--method fdatasync,none]
 * [--pattern append|overwrite] [--direct] [--seed S]`. Repeats plug pulls at random moments (1-3 s
 * into the run) and prints, per disk and method: cuts, acked, lost, false alarms, detection rate and
 * ack coverage. Each method runs alone in its own cut.
 *
 *   false alarms    cuts that reported losses on an honest or write-through disk with a sync method
 *   detection rate  cuts with losses found / cuts where losses must exist (lying and subtle disks;
 *                   none buffered)
 *   ack coverage    acks the listener holds / syncs the writer completed before the cut
 *
 * Each cut also checks verify's verdict and exit code against its counts (a `none` control passes
 * when it lost records of its own file, exit 0, is inconclusive when it lost nothing, exit 4, and
 * fails when its fsynced file itself is gone, exit 1); a mismatch counts
 * as an error.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import yargs from 'yargs'
import { hideBin } from 'yargs/helpers'
import { z } from 'zod'
import { methodNames } from '../../src/native/registry.js'
import { Listener } from '../../src/server/listener.js'
import { Lab, diskModes, labUnavailableReason, type DiskMode } from './harness.js'
import { failedRecords, plugPull } from './plug.js'
import { labSeed, seededRandom } from './seeded.js'

const argsSchema = z.object({
  cuts: z.number().int().positive().max(10_000),
  disk: z.string().transform((s) => s.split(',')).pipe(z.array(z.enum(diskModes as [DiskMode, ...DiskMode[]]))),
  method: z.string().transform((s) => s.split(',')).pipe(z.array(z.enum(methodNames))),
  pattern: z.enum(['append', 'overwrite']),
  direct: z.boolean(),
  seed: z.number().int().nonnegative().optional(),
})

interface Row {
  disk: DiskMode
  method: string
  cuts: number
  acked: number
  failed: number
  falseAlarms: number
  mustLose: number
  detected: number
  completed: number
  errors: number
}

async function campaign(): Promise<number> {
  const raw = await yargs(hideBin(process.argv))
    .option('cuts', { type: 'number', default: 20 })
    .option('disk', { type: 'string', default: 'honest,lying,writethru,subtle' })
    .option('method', { type: 'string', default: 'fdatasync,none' })
    .option('pattern', { type: 'string', default: 'append' })
    .option('direct', { type: 'boolean', default: false })
    .option('seed', { type: 'number' })
    .strict()
    .parse()
  const parsed = argsSchema.safeParse(raw)
  if (!parsed.success) {
    process.stderr.write(`lab: ${parsed.error.issues.map((i) => `--${String(i.path[0])}: ${i.message}`).join('; ')}\n`)
    return 2
  }
  const args = parsed.data
  const reason = labUnavailableReason()
  if (reason !== null) {
    process.stderr.write(`lab: cannot run here: ${reason}\n`)
    return 2
  }
  const seed = args.seed ?? labSeed()
  const random = seededRandom(seed)
  process.stderr.write(`lab: seed ${seed}; ${args.cuts} cuts per disk and method, ${args.pattern}${args.direct ? ' --direct' : ''}\n`)

  const outsideDir = mkdtempSync(join(tmpdir(), 'plugcheck-campaign-'))
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: join(outsideDir, 'listener') })
  const server = `127.0.0.1:${listener.address().port}`
  const rows: Row[] = []
  try {
    for (const disk of args.disk) {
      for (const method of args.method) {
        const row: Row = { disk, method: `${method}${args.direct ? ' --direct' : ''}`, cuts: 0, acked: 0, failed: 0, falseAlarms: 0, mustLose: 0, detected: 0, completed: 0, errors: 0 }
        rows.push(row)
        const syncMethod = method !== 'none'
        for (let cut = 0; cut < args.cuts; cut++) {
          const runMs = Math.round(1000 + random() * 2000)
          const lab = await Lab.create({ mode: disk, imageSizeMiB: 128 })
          try {
            const result = await plugPull(lab, { methods: [method], direct: args.direct, pattern: args.pattern, runMs, size: '8MiB', outsideDir, server })
            const run = result.report?.runs[0]
            if (run === undefined) {
              row.errors++
              process.stderr.write(`lab: ${disk} ${method} cut ${cut + 1}: verify failed: ${result.verifyStderr.trim()}\n`)
              continue
            }
            row.cuts++
            row.acked += run.acked
            row.failed += failedRecords(run)
            row.completed += result.completed.get(run.runId) ?? 0
            const lossesFound = failedRecords(run) > 0
            // Verify's verdict and exit code must follow the counts: a control (none) passes when it lost records of its
            // own file and is inconclusive (4) when it lost nothing, and fails (1) when its fsynced file itself is gone;
            // a sync method fails (1) on any loss, is inconclusive with no acks.
            const controlFileLost = !syncMethod && run.acked > 0 && run.superblock.kind !== 'valid'
            const wantVerdict = syncMethod || controlFileLost ? (lossesFound ? 'fail' : run.acked === 0 ? 'inconclusive' : 'pass') : lossesFound ? 'pass' : 'inconclusive'
            const wantCode = { pass: 0, fail: 1, inconclusive: 4 }[wantVerdict]
            if (run.verdict !== wantVerdict || result.verifyCode !== wantCode) {
              row.errors++
              process.stderr.write(`lab: ${disk} ${method} cut ${cut + 1}: verify said ${run.verdict} (exit ${result.verifyCode}), expected ${wantVerdict} (exit ${wantCode})\n`)
            }
            const faultyDisk = disk === 'lying' || disk === 'subtle'
            if (syncMethod && !faultyDisk && lossesFound) row.falseAlarms++
            if ((faultyDisk || (method === 'none' && !args.direct)) && run.acked > 0) {
              row.mustLose++
              if (lossesFound) row.detected++
            }
            process.stderr.write(`lab: ${disk} ${method} cut ${cut + 1}/${args.cuts} at ${runMs} ms: acked ${run.acked}, lost/torn/corrupt ${failedRecords(run)}\n`)
          } catch (error) {
            row.errors++
            process.stderr.write(`lab: ${disk} ${method} cut ${cut + 1}: ${(error as Error).message}\n`)
          } finally {
            await lab.teardown()
          }
        }
      }
    }
  } finally {
    await listener.close()
    rmSync(outsideDir, { recursive: true, force: true })
  }
  process.stdout.write(renderTable(rows))
  return rows.some((r) => r.falseAlarms > 0 || r.detected < r.mustLose || r.errors > 0) ? 1 : 0
}

function renderTable(rows: Row[]): string {
  const header = ['disk', 'method', 'cuts', 'acked', 'lost', 'false alarms', 'detection', 'ack coverage']
  const pct = (a: number, b: number): string => (b === 0 ? '-' : `${((100 * a) / b).toFixed(b === a ? 0 : 2)}%`)
  const body = rows.map((r) => [
    r.disk,
    r.method,
    String(r.cuts) + (r.errors > 0 ? ` (+${r.errors} errors)` : ''),
    r.acked.toLocaleString('en-US'),
    r.failed.toLocaleString('en-US'),
    String(r.falseAlarms),
    r.mustLose === 0 ? '-' : `${r.detected}/${r.mustLose}`,
    pct(r.acked, r.completed),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)))
  const line = (cells: string[]): string => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n') + '\n'
}

process.exitCode = await campaign()
