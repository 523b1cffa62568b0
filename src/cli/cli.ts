/**
 * The command line: yargs parses, zod validates (cli-args.ts), one function per command runs and
 * returns an exit code. Nothing here calls process.exit (src/bin.ts does, once).
 */
import { writeSync } from 'node:fs'
import { resolve } from 'node:path'
import yargs, { type Argv } from 'yargs'
import type { Io } from '../base/io.js'
import { PlugcheckError, exitCodes, usageError } from '../base/errors.js'
import { methodNames } from '../native/methods.js'
import { defaultPort } from '../protocol/default-port.js'
import { patterns } from '../record/patterns.js'

/**
 * The flag schemas, and each command's module, load when that command runs: `--help` and `--version`
 * load yargs and the few constants their text shows, never zod, koffi or msgpackr (bench/startup.ts).
 */
const flagSchemas = () => import('./cli-args.js')

/** --listener-timeout SECONDS, for write, verify, agent and runs (validated in cli-args.ts). */
const listenerTimeoutOption = {
  type: 'number',
  default: 10,
  describe: 'seconds to wait for the listener (connect, answers, recorded reports) before giving up',
} as const

export const processIo: Io = {
  out: (text) => void process.stdout.write(text),
  outNow: (text) => writeNow(1, text),
  err: (text) => void process.stderr.write(text),
  statusTty: process.stderr.isTTY === true,
}

/**
 * Writes text to fd before returning. stdout to a pipe is asynchronous in Node, so a line written
 * with process.stdout.write can still be queued when the process is SIGKILLed; a writer's run line
 * must be out first. A full non-blocking pipe (EAGAIN) falls back to the asynchronous write. A reader
 * that went away (EPIPE: `plugcheck write ... | head -1`) loses the trail, never the run.
 */
function writeNow(fd: number, text: string): void {
  const bytes = Buffer.from(text)
  let done = 0
  try {
    while (done < bytes.length) done += writeSync(fd, bytes, done)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EAGAIN' && done < bytes.length) process.stdout.write(bytes.subarray(done))
  }
}

/** The options of a write, shared by `write` and `agent` (which writes the next cycle with them). */
function writeOptions<T>(y: Argv<T>) {
  return y
    .option('server', { type: 'string', demandOption: true, describe: 'listener HOST[:PORT]' })
    .option('file', { type: 'string', demandOption: true, describe: 'data file on the storage under test' })
    .option('method', { type: 'string', default: 'fdatasync', describe: `sync method, or a comma list: ${methodNames.join(', ')}` })
    .option('direct', {
      type: 'boolean',
      default: false,
      describe: 'bypass the OS cache (O_DIRECT, F_NOCACHE, FILE_FLAG_NO_BUFFERING; record size a multiple of 4096)',
    })
    .option('record-size', { type: 'string', default: '8192', describe: 'bytes per record, a multiple of 512' })
    .option('size', { type: 'string', default: '256MiB', describe: 'data file size; append wraps to the start when full' })
    .option('pattern', {
      choices: patterns,
      default: 'append' as const,
      describe: 'append (file grows) or overwrite (random slots in place)',
    })
    .option('token', { type: 'string', describe: "the listener's --token" })
    .option('force', { type: 'boolean', default: false, describe: 'replace a file that is not a plugcheck data file' })
    .option('listener-timeout', listenerTimeoutOption)
    .option('jobs', {
      type: 'number',
      default: 1,
      describe: 'writer threads, each with its own data file (PATH.jobK), run and connection; verify judges them together',
    })
}

/**
 * `--reserve -1%` as `--reserve=-1%`: yargs reads a value that starts with a dash and is not a number
 * as more flags ("Unknown arguments: 1, %"); joined, the flag's own check names what is wrong.
 */
function joinDashValues(argv: readonly string[]): string[] {
  const out: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const next = argv[i + 1]
    if (/^--[a-z][a-z-]*$/.test(arg) && next !== undefined && /^-\d/.test(next) && !Number.isFinite(Number(next))) {
      out.push(`${arg}=${next}`)
      i++
    } else out.push(arg)
  }
  return out
}

export async function main(argv: readonly string[], io: Io = processIo): Promise<number> {
  let run: (() => Promise<number>) | undefined
  const parser = yargs(joinDashValues(argv))
    .scriptName('plugcheck')
    .usage('$0 <command> [options]\n\nProves whether a storage stack keeps what fsync acknowledged, across a real power cut.')
    .strict()
    .parserConfiguration({ 'duplicate-arguments-array': false })
    .exitProcess(false)
    .fail((message, error) => {
      throw error instanceof PlugcheckError ? error : usageError(message ?? error?.message ?? 'bad command line')
    })
    .command(
      'listen',
      'run on a second machine that keeps power: store acknowledged seqs durably',
      (y) =>
        y
          .option('port', { type: 'number', default: defaultPort, describe: 'TCP port (0 picks a free one)' })
          .option('host', { type: 'string', default: '0.0.0.0', describe: 'address to listen on' })
          .option('dir', { type: 'string', default: './plugcheck-data', describe: 'where runs and acks are stored' })
          .option('token', { type: 'string', describe: 'shared secret writers and verifiers must present' })
          .option('max-connections', { type: 'number', default: 1024, describe: 'connections served at once; more are told so and closed' })
          .option('max-pending-hellos', {
            type: 'number',
            default: 1024,
            describe: 'connections waiting to say hello; beyond, the oldest is closed',
          })
          .option('max-runs', {
            type: 'number',
            default: 100_000,
            describe: 'runs on record in all; beyond, new runs are refused (prune ended ones: runs --prune, --retain)',
          })
          .option('max-runs-per-peer', { type: 'number', default: 10_000, describe: 'runs on record per peer address (IPv6: per /64)' })
          .option('max-store-bytes', {
            type: 'string',
            default: 'none',
            describe: 'bytes of runs on record in all (e.g. 20GiB, or none); live runs keep recording past it',
          })
          .option('max-store-bytes-per-peer', {
            type: 'string',
            default: 'none',
            describe: 'bytes of runs on record per peer address (e.g. 2GiB, or none)',
          })
          .option('reserve', {
            type: 'string',
            describe: 'free space of --dir under which new runs are refused, a size or a % (default: 1GiB or 5%, the smaller)',
          })
          .option('retain', { type: 'string', describe: 'prune ended runs older than this (30d, 12h, 90m, 45s) as the listener runs' })
          .option('events', { type: 'string', describe: 'also append every event as a JSON line to this file' })
          .option('campaign', { type: 'string', describe: 'run a power-cut campaign of this name (resumed if the directory holds it)' })
          .option('cycles', { type: 'number', default: undefined, describe: 'campaign: cycles to run (default 10)' })
          .option('cut-command', { type: 'string', describe: 'campaign: the command that cuts the power of the machine under test' })
          .option('cut-after', { type: 'string', describe: 'campaign: MIN-MAX seconds after the writer is steady to cut' })
          .option('reboot-timeout', { type: 'number', describe: 'campaign: seconds to wait for the agent after a cut (default 600)' })
          .option('seed', { type: 'number', describe: 'campaign: seed of the cut moments (default: random, logged)' }),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('listen', args)
          const { runListen } = await import('../server/listen/listen.js')
          return runListen(
            {
              host: a.host,
              port: a.port,
              dir: a.dir,
              maxConnections: a.maxConnections,
              maxPendingHandshakes: a.maxPendingHellos,
              quotas: {
                maxRuns: a.maxRuns,
                maxRunsPerPeer: a.maxRunsPerPeer,
                maxStoreBytes: a.maxStoreBytes,
                maxStoreBytesPerPeer: a.maxStoreBytesPerPeer,
              },
              ...(a.reserve === undefined ? {} : { reserve: a.reserve }),
              ...(a.retain === undefined ? {} : { retainMs: a.retain }),
              ...(a.token === undefined ? {} : { token: a.token }),
              ...(a.events === undefined ? {} : { eventsFile: resolve(a.events) }),
              ...(a.campaign === undefined
                ? {}
                : {
                    campaign: {
                      name: a.campaign,
                      cycles: a.cycles ?? 10,
                      cutCommand: a.cutCommand!,
                      cutAfterS: a.cutAfter!,
                      rebootTimeoutS: a.rebootTimeout ?? 600,
                      ...(a.seed === undefined ? {} : { seed: a.seed }),
                    },
                  }),
            },
            io,
          )
        }
      },
    )
    .command(
      'write',
      'on the machine under test: write synced records and stream their acks to the listener',
      (y) =>
        writeOptions(y)
          .option('duration', { type: 'number', describe: 'seconds to run (default: until killed)' })
          .option('discard-unverified', {
            type: 'boolean',
            default: false,
            describe: "write even though the path's last run vanished (its machine may have lost power) and was never verified",
          })
          .option('trace-file', { type: 'string', hidden: true, describe: 'lab/bench: log each completed sync to this side file' }),
      (args) => {
        run = async () => {
          const { validate, writeOptionsOf } = await flagSchemas()
          const a = validate('write', args)
          const { writeCommand } = await import('../client/write/jobs.js')
          return writeCommand(
            {
              ...writeOptionsOf(a),
              discardUnverified: a.discardUnverified,
              ...(a.duration === undefined ? {} : { durationS: a.duration }),
              ...(a.traceFile === undefined ? {} : { traceFile: resolve(a.traceFile) }),
            },
            io,
          )
        }
      },
    )
    .command(
      'agent',
      'on the machine under test, started at boot: verify the last cycle, report it, and write the next one of the campaign',
      (y) =>
        writeOptions(y).option('print-service', {
          choices: ['systemd', 'windows'] as const,
          describe: 'print a systemd unit or a Windows scheduled task that starts this agent at boot, and exit',
        }),
      (args) => {
        run = async () => {
          const { validate, writeOptionsOf } = await flagSchemas()
          const a = validate('agent', args)
          const { runAgent } = await import('../client/agent/agent.js')
          return runAgent(
            { ...writeOptionsOf(a), ...(a.printService === undefined ? {} : { printService: a.printService }) },
            process.argv.slice(2),
            io,
          )
        }
      },
    )
    .command(
      'verify',
      'after the power cut and reboot: check that every acknowledged record survived',
      (y) =>
        y
          .option('server', { type: 'string', describe: 'listener HOST[:PORT]' })
          .option('acks', { type: 'string', describe: "a listener's --dir, read offline instead of --server" })
          .option('file', { type: 'string', demandOption: true, describe: 'the path given to write --file' })
          .option('run', { type: 'string', describe: 'judge this run id instead of the latest for this host and path' })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
          .option('token', { type: 'string', describe: "the listener's --token" })
          .option('host', { type: 'string', describe: 'host name the writer ran on (default: this machine)' })
          .option('listener-timeout', listenerTimeoutOption),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('verify', args)
          const { runVerify } = await import('../client/verify/verify.js')
          return runVerify(
            {
              source: a.server !== undefined ? { server: a.server } : { acksDir: resolve(a.acks!) },
              file: a.file,
              json: a.json,
              listenerTimeoutMs: a.listenerTimeout,
              ...(a.run === undefined ? {} : { runId: a.run }),
              ...(a.token === undefined ? {} : { token: a.token }),
              ...(a.host === undefined ? {} : { host: a.host }),
            },
            io,
          )
        }
      },
    )
    .command(
      'demo',
      'one-machine rehearsal: listener, writer, SIGKILL, verify, verdict',
      (y) =>
        y
          .option('method', { type: 'string', default: 'fdatasync', describe: 'sync method to rehearse with' })
          .option('kill-after', { type: 'number', default: 3, describe: 'seconds before the writer is killed' })
          .option('json', { type: 'boolean', default: false, describe: "print verify's JSON" }),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('demo', args)
          const { runDemo } = await import('./demo.js')
          return runDemo({ method: a.method[0]!, killAfterS: a.killAfter, json: a.json }, io)
        }
      },
    )
    .command(
      'bench',
      "pg_test_fsync's tables for this storage, with the environment and a check of which figures are too good to be true",
      (y) =>
        y
          .option('file', {
            type: 'string',
            describe: 'scratch file, or a directory to create it in (default: plugcheck-bench.<random> here)',
          })
          .option('secs', { type: 'number', default: 5, describe: 'seconds per test (fractions allowed)' })
          .option('record-size', { type: 'string', default: '8192', describe: 'bytes per write, a multiple of 512' })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' }),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('bench', args)
          const { runBench } = await import('../bench/bench.js')
          return runBench(
            { secsPerTest: a.secs, recordSizeBytes: a.recordSize, json: a.json, ...(a.file === undefined ? {} : { file: a.file }) },
            io,
          )
        }
      },
    )
    .command(
      'runs',
      'list the runs a listener holds: host, path, method, acked, started, ended or vanished, verdict; or prune old ended runs from its --dir',
      (y) =>
        y
          .option('server', { type: 'string', describe: 'listener HOST[:PORT]' })
          .option('prune', {
            type: 'boolean',
            default: false,
            describe: "remove runs that ended over --older-than ago from the listener's --dir (listener stopped)",
          })
          .option('older-than', { type: 'string', describe: 'prune: runs that ended longer ago than this (30d, 12h, 90m, 45s)' })
          .option('dir', { type: 'string', describe: "prune: the listener's --dir" })
          .option('dry-run', { type: 'boolean', default: false, describe: 'prune: say what would be pruned, remove nothing' })
          .option('campaign', { type: 'string', describe: 'only the runs of this campaign' })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
          .option('token', { type: 'string', describe: "the listener's --token" })
          .option('listener-timeout', listenerTimeoutOption),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('runs', args)
          if (a.prune) {
            const { runPrune } = await import('../server/listen/prune.js')
            return runPrune({ dir: a.dir!, olderThanMs: a.olderThan!, dryRun: a.dryRun, json: a.json }, io)
          }
          const { runRuns } = await import('./runs.js')
          return runRuns(
            {
              server: a.server!,
              json: a.json,
              listenerTimeoutMs: a.listenerTimeout,
              ...(a.token === undefined ? {} : { token: a.token }),
              ...(a.campaign === undefined ? {} : { campaign: a.campaign }),
            },
            io,
          )
        }
      },
    )
    .command(
      'report',
      "a campaign's report from a listener's directory: per cycle, per method, per device; --html for a timeline",
      (y) =>
        y
          .option('dir', { type: 'string', demandOption: true, describe: "the listener's --dir (read only)" })
          .option('campaign', {
            type: 'string',
            array: true,
            describe: 'campaign name; several side by side (default: every campaign in the directory)',
          })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
          .option('html', { type: 'string', describe: 'also write a self-contained HTML report to this file' }),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('report', args)
          const { runReport } = await import('../report/report.js')
          return runReport(
            {
              dir: a.dir,
              json: a.json,
              ...(a.campaign === undefined ? {} : { campaigns: a.campaign }),
              ...(a.html === undefined ? {} : { htmlFile: a.html }),
            },
            io,
          )
        }
      },
    )
    .command(
      'methods',
      "this platform's sync methods: available or not and why, the calls each makes, what --direct does",
      (y) => y.option('json', { type: 'boolean', default: false, describe: 'print one JSON document' }),
      (args) => {
        run = async () => {
          const a = (await flagSchemas()).validate('methods', args)
          const { runMethods } = await import('./methods.js')
          return runMethods({ json: a.json }, io)
        }
      },
    )
    .demandCommand(1, 'give a command: listen, write, verify, agent, runs, report, bench, demo or methods')
    .help()
    .version()
    .wrap(Math.min(110, process.stdout.columns ?? 110))

  await parser.parseAsync()
  return run === undefined ? exitCodes.ok : run()
}

/** One line naming the problem, a hint where one helps; no stack trace for operating errors. */
export function reportError(error: unknown, io: Io): number {
  if (error instanceof PlugcheckError) {
    io.err(`plugcheck: ${error.message}\n`)
    if (error.hint !== undefined) io.err(`hint: ${error.hint}\n`)
    return error.exitCode
  }
  io.err(`plugcheck: internal error: ${(error as Error)?.stack ?? String(error)}\n`)
  return exitCodes.runtime
}
