/**
 * Verify vs dd: how fast `plugcheck verify` reads and judges a data file, against `dd` reading the
 * same file into /dev/null, both from a cold page cache.
 *
 * The file is a real run: `plugcheck listen` (store on tmpfs) and `plugcheck write --method none
 * --pattern append` until the file reaches --size, then SIGTERM (the run ends cleanly, every record
 * acknowledged). Or reuse one with --file and --acks (the listener's directory). Rounds interleave
 * (the order of dd and each verify rotates from round to round) and the page cache is dropped
 * before each timed command: as root `sync` + `echo 3 > /proc/sys/vm/drop_caches`, otherwise
 * posix_fadvise(DONTNEED) on the data file through the native port (the bench says which).
 *
 * verify runs as the user runs it, `plugcheck verify --acks DIR --file FILE`, under /usr/bin/time
 * for its peak RSS and CPU time (user + system: on a shared machine the wall time is partly waiting
 * for a core, the CPU time is not). Its wall time includes Node's start-up; the start-up alone is
 * measured in each round (also cold) as a verify that finds no run, and "net" figures subtract it.
 *
 * With --baseline-bin (another checkout's bin/plugcheck.js, e.g. the previous commit in a worktree)
 * each round also times that build's verify on the same file, so before and after are side by side.
 * --threads 0,2 times each build once per checking-thread count (PLUGCHECK_VERIFY_THREADS; 0: the
 * main thread alone) instead of with its default. dd runs under /usr/bin/time too: a cold read
 * costs kernel CPU (page cache, virtio), which verify pays as well.
 *
 * Usage: node --import tsx bench/verify-vs-dd.ts [--dir DIR] [--size 4GiB] [--rounds 3]
 *          [--file PATH --acks DIR] [--keep] [--bin PATH/bin/plugcheck.js] [--baseline-bin PATH] [--threads 0,2] [--dd-direct]
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { threadsEnv } from '../src/client/verify/scan-threads.js'
import { nativePort } from '../src/native/index.js'
import { parseSize } from '../src/base/sizes.js'
import { fileSystemName, median, plugcheckBin, runChild, startListenerProcess, table, tmpfsDir } from './common.js'

const goalRatio = 0.9
const fillPollMs = 100

/** One verify build timed in a round: wall time, its start-up alone, peak RSS. */
interface VerifyTiming {
  readonly s: number
  readonly startupS: number
  readonly rssKiB: number
  /** User + system CPU seconds of the verify process: steady when the wall time is mostly waiting for a shared core. */
  readonly cpuS: number
}

/** A verify timed in every round: a build, with its default thread count or a given one. */
interface VerifySide {
  readonly bin: string
  readonly threads: string | undefined
  readonly label: string
}

interface Round {
  readonly ddS: number
  readonly ddCpuS: number
  /** Per verify side, in the order of --bin, --baseline-bin (each with every --threads value). */
  readonly verify: VerifyTiming[]
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string', default: tmpdir() },
      size: { type: 'string', default: '4GiB' },
      rounds: { type: 'string', default: '3' },
      file: { type: 'string' },
      acks: { type: 'string' },
      keep: { type: 'boolean', default: false },
      bin: { type: 'string', default: plugcheckBin },
      'baseline-bin': { type: 'string' },
      threads: { type: 'string' },
      'dd-direct': { type: 'boolean', default: false },
    },
  })
  const roundCount = Number(values.rounds)
  if (!(roundCount >= 1)) throw new Error('--rounds must be >= 1')
  if (values.acks !== undefined && values.file === undefined) throw new Error('--acks goes with --file')
  const bin = resolve(values.bin)
  const bins = [bin, ...(values['baseline-bin'] === undefined ? [] : [resolve(values['baseline-bin'])])]
  const threadCounts = values.threads === undefined ? [undefined] : values.threads.split(',')
  if (threadCounts.some((n) => n !== undefined && !/^\d+$/.test(n))) throw new Error('--threads takes counts, e.g. 0,2')
  const verifySides: VerifySide[] = bins.flatMap((b, i) =>
    threadCounts.map((threads) => ({
      bin: b,
      threads,
      label: `${i === 0 ? 'this build' : `baseline (${b})`}${threads === undefined ? '' : `, ${threads} threads`}`,
    })),
  )

  let file: string
  let acksDir: string
  const cleanup: string[] = []
  const reuse = values.file !== undefined && values.acks !== undefined && existsSync(values.file)
  if (reuse) {
    file = resolve(values.file!)
    acksDir = resolve(values.acks!)
  } else {
    file = values.file === undefined ? join(resolve(values.dir), `plugcheck-verify-bench-${process.pid}.dat`) : resolve(values.file)
    acksDir = values.acks === undefined ? mkdtempSync(join(tmpfsDir, 'plugcheck-verify-bench-acks-')) : resolve(values.acks)
    if (!values.keep && values.file === undefined) cleanup.push(file)
    if (!values.keep && values.acks === undefined) cleanup.push(acksDir)
  }
  const emptyAcks = mkdtempSync(join(tmpdir(), 'plugcheck-verify-bench-empty-'))
  cleanup.push(emptyAcks)

  try {
    if (!reuse) {
      const sizeBytes = parseSize(values.size)
      if (sizeBytes === null) throw new Error(`--size ${values.size} is not a size`)
      await writeRun(bin, file, acksDir, sizeBytes)
    }
    const sizeBytes = statSync(file).size
    const gb = sizeBytes / 1e9
    const drop = cacheDropper(file)
    console.log(`file ${file} (${fileSystemName(file)}), ${(sizeBytes / 2 ** 30).toFixed(2)} GiB; page cache dropped with ${drop.how}`)
    console.log(`verify: ${bins.join(', then the baseline ')}; dd: bs=1M${values['dd-direct'] ? ' iflag=direct' : ''}`)
    const timeDd = async (): Promise<{ ddS: number; ddCpuS: number }> => {
      drop.run()
      let usage = { rssKiB: 0, cpuS: 0 }
      const ddS = await timed(async () => {
        usage = await usageOf(['dd', `if=${file}`, 'of=/dev/null', 'bs=1M', ...(values['dd-direct'] ? ['iflag=direct'] : [])], [0])
      })
      return { ddS, ddCpuS: usage.cpuS }
    }
    const timeVerify = async ({ bin: verifyBin, threads }: VerifySide): Promise<VerifyTiming> => {
      drop.run()
      let usage = { rssKiB: 0, cpuS: 0 }
      const env = threads === undefined ? [] : ['env', `${threadsEnv}=${threads}`]
      const s = await timed(async () => {
        usage = await usageOf([...env, process.execPath, verifyBin, 'verify', '--acks', acksDir, '--file', file], [0, 4]) // 4: a `none` run that lost nothing
      })
      drop.run()
      const startupS = await timed(() => checkedRun(process.execPath, [verifyBin, 'verify', '--acks', emptyAcks, '--file', file], [2]))
      return { s, startupS, ...usage }
    }
    const rounds: Round[] = []
    for (let r = 0; r < roundCount; r++) {
      // The order rotates from round to round, so a drift of the shared machine hits every side alike.
      const sides = [
        async () => ({ dd: await timeDd() }),
        ...verifySides.map((side, i) => async () => ({ index: i, timing: await timeVerify(side) })),
      ]
      const verify: VerifyTiming[] = []
      let dd = { ddS: 0, ddCpuS: 0 }
      for (let i = 0; i < sides.length; i++) {
        const result = await sides[(i + r) % sides.length]!()
        if ('dd' in result) dd = result.dd
        else verify[result.index] = result.timing
      }
      const { ddS } = dd
      rounds.push({ ...dd, verify })
      const parts = verify.map(
        (v, i) =>
          `${verifySides[i]!.label}: ${(gb / v.s).toFixed(2)} GB/s (${v.s.toFixed(2)} s, start-up ${v.startupS.toFixed(2)} s, ratio ${(ddS / v.s).toFixed(3)}, net ${(ddS / (v.s - v.startupS)).toFixed(3)}, CPU ${v.cpuS.toFixed(2)} s, peak RSS ${(v.rssKiB / 1024).toFixed(0)} MiB)`,
      )
      console.log(
        `  round ${r + 1}: dd ${(gb / ddS).toFixed(2)} GB/s (${ddS.toFixed(2)} s, CPU ${dd.ddCpuS.toFixed(2)} s); ${parts.join('; ')}`,
      )
    }
    const spread = (xs: number[]): string => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`
    console.log(
      `\n${(sizeBytes / 2 ** 30).toFixed(2)} GiB, ${roundCount} rounds, cold cache; medians over rounds; dd ${median(rounds.map((r) => gb / r.ddS)).toFixed(2)} GB/s, CPU ${median(rounds.map((r) => r.ddCpuS / gb)).toFixed(2)} s/GB`,
    )
    const rows = [['verify', 'GB/s', 'verify/dd', 'range', 'net verify/dd', 'range', 'CPU s/GB', 'peak RSS', 'goal', 'met']]
    verifySides.forEach((side, i) => {
      const ratios = rounds.map((r) => r.ddS / r.verify[i]!.s)
      const netRatios = rounds.map((r) => r.ddS / (r.verify[i]!.s - r.verify[i]!.startupS))
      rows.push([
        side.label,
        median(rounds.map((r) => gb / r.verify[i]!.s)).toFixed(2),
        median(ratios).toFixed(3),
        spread(ratios),
        median(netRatios).toFixed(3),
        spread(netRatios),
        median(rounds.map((r) => r.verify[i]!.cpuS / gb)).toFixed(2),
        `${(Math.max(...rounds.map((r) => r.verify[i]!.rssKiB)) / 1024).toFixed(0)} MiB`,
        `>= ${goalRatio}`,
        median(ratios) >= goalRatio ? 'yes' : median(netRatios) >= goalRatio ? 'net only' : 'no',
      ])
    })
    console.log(table(rows))
    return 0
  } finally {
    for (const path of cleanup) rmSync(path, { recursive: true, force: true })
  }
}

/** A real append run of --method none into file until it reaches sizeBytes, acks stored in acksDir. */
async function writeRun(bin: string, file: string, acksDir: string, sizeBytes: number): Promise<void> {
  console.log(`writing a ${(sizeBytes / 2 ** 30).toFixed(2)} GiB run to ${file} (acks in ${acksDir})`)
  const listener = await startListenerProcess(acksDir)
  try {
    const args = [
      bin,
      'write',
      '--server',
      `127.0.0.1:${listener.port}`,
      '--file',
      file,
      '--method',
      'none',
      '--pattern',
      'append',
      '--size',
      String(sizeBytes),
      '--duration',
      '86400',
      '--force',
    ]
    const writer = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] })
    let output = ''
    writer.stdout.setEncoding('utf8').on('data', (s: string) => (output += s))
    const exited = new Promise<number | null>((done) => writer.once('exit', (code) => done(code)))
    const poll = setInterval(() => {
      if (existsSync(file) && statSync(file).size >= sizeBytes) writer.kill('SIGTERM') // by this child's pid; write ends the run cleanly
    }, fillPollMs)
    const code = await exited // 143: stopped by our SIGTERM, every ack recorded
    clearInterval(poll)
    if (code !== 0 && code !== 143) throw new Error(`plugcheck write exited ${code}:\n${output}`)
    console.log(
      output
        .trim()
        .split('\n')
        .filter((l) => /records/.test(l))
        .join('\n'),
    )
  } finally {
    await listener.stop()
  }
}

/** Drops file's pages from the page cache: the whole cache as root, else posix_fadvise(DONTNEED). */
function cacheDropper(file: string): { how: string; run(): void } {
  const procFile = '/proc/sys/vm/drop_caches'
  if (process.getuid?.() === 0 && existsSync(procFile)) {
    return {
      how: `sync; echo 3 > ${procFile}`,
      run: () => {
        if (spawnSync('sync', [], { stdio: 'ignore' }).status !== 0) throw new Error('sync failed')
        writeFileSync(procFile, '3\n')
      },
    }
  }
  return {
    how: 'posix_fadvise(POSIX_FADV_DONTNEED) on the data file (not root: other files stay cached)',
    run: () => {
      if (!nativePort().dropCache(file)) throw new Error('this platform has no posix_fadvise: cannot drop the page cache')
    },
  }
}

/** Runs a command under /usr/bin/time: its peak RSS and CPU time (user + system, all threads). */
async function usageOf(command: readonly string[], okCodes: readonly number[]): Promise<{ rssKiB: number; cpuS: number }> {
  const result = await checkedRun('/usr/bin/time', ['-f', 'usage %M %U %S', ...command], okCodes)
  const match = /usage (\d+) ([\d.]+) ([\d.]+)/.exec(result.stderr)
  if (match === null) throw new Error(`no usage from /usr/bin/time:\n${result.stderr}`)
  return { rssKiB: Number(match[1]), cpuS: Number(match[2]) + Number(match[3]) }
}

async function checkedRun(
  command: string,
  args: readonly string[],
  okCodes: readonly number[],
): Promise<{ stdout: string; stderr: string }> {
  const result = await runChild(command, args)
  if (result.code === null || !okCodes.includes(result.code))
    throw new Error(`${command} ${args.join(' ')} exited ${result.code}:\n${result.stdout}${result.stderr}`)
  return result
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint()
  await run()
  return Number(process.hrtime.bigint() - start) / 1e9
}

process.exitCode = await main()
