/**
 * The command line: yargs parses, zod validates, one function per command runs and returns an exit
 * code. Nothing here calls process.exit (src/bin.ts does, once).
 */
import { writeSync } from 'node:fs'
import { resolve } from 'node:path'
import yargs, { type Argv } from 'yargs'
import { z } from 'zod'
import { runBench } from './bench/bench.js'
import { runDemo } from './client/demo.js'
import { parseEndpoint } from './client/endpoint.js'
import { runVerify } from './client/verify.js'
import { runWrite, type Io, type WriteOptions } from './client/writer.js'
import { PlugcheckError, exitCodes, usageError } from './errors.js'
import { isMethodName, methodNames, type MethodName } from './native/registry.js'
import { campaignNameSchema, defaultPort } from './protocol/messages.js'
import { patterns, runIdSchema } from './record/format.js'
import { runListen } from './server/listen.js'
import { runMethods } from './client/methods.js'
import { runAgent } from './client/agent.js'
import { runRuns } from './client/runs.js'
import { runReport } from './report/report.js'
import { parseSize } from './sizes.js'

const endpointArg = z.string().transform((text, ctx) => {
  const parsed = parseEndpoint(text)
  if (typeof parsed === 'string') {
    ctx.addIssue({ code: 'custom', message: parsed })
    return z.NEVER
  }
  return parsed
})

const sizeArg = (flag: string) =>
  z.union([z.string(), z.number()]).transform((value, ctx) => {
    const bytes = typeof value === 'number' ? value : parseSize(value)
    if (bytes === null || !Number.isSafeInteger(bytes) || bytes <= 0) {
      ctx.addIssue({ code: 'custom', message: `${flag} ${value} is not a size (examples: 8192, 8k, 256MiB, 1G)` })
      return z.NEVER
    }
    return bytes
  })

const methodsArg = z.string().transform((text, ctx) => {
  const names = text.split(',').map((s) => s.trim()).filter(Boolean)
  if (names.length === 0) ctx.addIssue({ code: 'custom', message: '--method is empty' })
  for (const name of names) {
    if (!isMethodName(name)) ctx.addIssue({ code: 'custom', message: `unknown method ${name} (known: ${methodNames.join(', ')})` })
  }
  return names as MethodName[]
})

/** --listener-timeout SECONDS, for write and verify: default 10. */
export const listenerTimeoutArg = z
  .number({ message: '--listener-timeout must be a number of seconds' })
  .positive('--listener-timeout must be positive')
  .max(3600, '--listener-timeout is at most 3600 seconds')
  .transform((s) => Math.round(s * 1000))
export const listenerTimeoutOption = {
  type: 'number',
  default: 10,
  describe: 'seconds to wait for the listener (connect, answers, recorded reports) before giving up',
} as const

const writeArgs = z.object({
  server: endpointArg,
  file: z.string().min(1).transform((p) => resolve(p)),
  method: methodsArg,
  direct: z.boolean(),
  recordSize: sizeArg('--record-size'),
  size: sizeArg('--size'),
  pattern: z.enum(patterns),
  duration: z.number().positive('--duration must be positive').optional(),
  token: z.string().optional(),
  force: z.boolean(),
  traceFile: z.string().optional(),
  listenerTimeout: listenerTimeoutArg,
})

const agentArgs = writeArgs
  .omit({ duration: true, traceFile: true })
  .extend({ printService: z.enum(['systemd', 'windows']).optional() })

const verifyArgs = z
  .object({
    server: endpointArg.optional(),
    acks: z.string().min(1).optional(),
    file: z.string().min(1).transform((p) => resolve(p)),
    run: runIdSchema.optional(),
    json: z.boolean(),
    token: z.string().optional(),
    host: z.string().min(1).optional(),
    listenerTimeout: listenerTimeoutArg,
  })
  .refine((a) => (a.server === undefined) !== (a.acks === undefined), { message: 'give exactly one of --server HOST[:PORT] or --acks DIR' })

/** --cut-after MIN-MAX in seconds ("30-90", "45"). */
const cutAfterArg = z.string().transform((text, ctx) => {
  const match = /^(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?$/.exec(text.trim())
  const min = match === null ? NaN : Number(match[1])
  const max = match === null ? NaN : Number(match[2] ?? match[1])
  if (!Number.isFinite(min) || !Number.isFinite(max) || max < min || max > 86_400) {
    ctx.addIssue({ code: 'custom', message: `--cut-after ${text}: give MIN-MAX seconds after the writer is steady, e.g. 30-90 (at most 86400)` })
    return z.NEVER
  }
  return [min, max] as [number, number]
})

const listenArgs = z
  .object({
    host: z.string().min(1),
    port: z.number().int().min(0).max(65535),
    dir: z.string().min(1),
    token: z.string().optional(),
    maxConnections: z.number().int('--max-connections must be a whole number').min(1, '--max-connections must be at least 1').max(1_000_000),
    events: z.string().min(1).optional(),
    campaign: campaignNameSchema.optional(),
    cycles: z.number().int('--cycles must be a whole number').min(1, '--cycles must be at least 1').max(100_000).optional(),
    cutCommand: z.string().min(1).max(4096).optional(),
    cutAfter: cutAfterArg.optional(),
    rebootTimeout: z.number().positive('--reboot-timeout must be positive').max(86_400).optional(),
    seed: z.number().int().nonnegative().max(2 ** 32 - 1).optional(),
  })
  .superRefine((a, ctx) => {
    const campaignFlags = [a.cycles, a.cutCommand, a.cutAfter, a.rebootTimeout, a.seed].some((v) => v !== undefined)
    if (a.campaign === undefined && campaignFlags) ctx.addIssue({ code: 'custom', message: '--cycles, --cut-command, --cut-after, --reboot-timeout and --seed need --campaign NAME' })
    if (a.campaign !== undefined && (a.cutCommand === undefined || a.cutAfter === undefined)) {
      ctx.addIssue({ code: 'custom', message: '--campaign needs --cut-command CMD and --cut-after MIN-MAX' })
    }
  })

const runsArgs = z.object({
  server: endpointArg,
  json: z.boolean(),
  token: z.string().optional(),
  campaign: campaignNameSchema.optional(),
  listenerTimeout: listenerTimeoutArg,
})

const reportArgs = z.object({
  dir: z.string().min(1).transform((p) => resolve(p)),
  campaign: z.array(campaignNameSchema).optional(),
  json: z.boolean(),
  html: z.string().min(1).transform((p) => resolve(p)).optional(),
})

const demoArgs = z.object({
  method: methodsArg.refine((m) => m.length === 1, { message: 'demo takes one --method' }),
  killAfter: z.number().positive().max(600),
  json: z.boolean(),
})

/** --record-size for bench: whole sectors, and two records must fit the 16 MiB test region many times over. */
const benchRecordSizeBytesMax = 1024 * 1024
const benchArgs = z.object({
  file: z.string().min(1).optional(),
  secs: z.number({ message: '--secs must be a number of seconds' }).positive('--secs must be positive').max(3600, '--secs is at most 3600 per test'),
  recordSize: sizeArg('--record-size').refine((bytes) => bytes % 512 === 0 && bytes <= benchRecordSizeBytesMax, {
    message: `--record-size must be a multiple of 512 bytes, at most ${benchRecordSizeBytesMax / 1024} KiB`,
  }),
  json: z.boolean(),
})

const methodsArgs = z.object({ json: z.boolean() })

function validated<T>(schema: z.ZodType<T>, args: unknown): T {
  const parsed = schema.safeParse(args)
  if (!parsed.success) {
    const flag = (key: PropertyKey): string => `--${String(key).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
    const messages = parsed.error.issues.map((i) => (i.path.length > 0 && !/^(--|unknown method)/.test(i.message) ? `${flag(i.path[0]!)}: ${i.message}` : i.message))
    throw usageError(messages.join('; '))
  }
  return parsed.data
}

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

/** What `write` and `agent` share, from their validated flags. */
function writeOptionsOf(a: z.infer<typeof agentArgs>): Omit<WriteOptions, 'durationS' | 'traceFile'> {
  return {
    server: a.server,
    file: a.file,
    methods: a.method,
    direct: a.direct,
    recordSizeBytes: a.recordSize,
    sizeBytes: a.size,
    pattern: a.pattern,
    force: a.force,
    listenerTimeoutMs: a.listenerTimeout,
    ...(a.token === undefined ? {} : { token: a.token }),
  }
}

/** The options of a write, shared by `write` and `agent` (which writes the next cycle with them). */
function writeOptions<T>(y: Argv<T>) {
  return y
    .option('server', { type: 'string', demandOption: true, describe: 'listener HOST[:PORT]' })
    .option('file', { type: 'string', demandOption: true, describe: 'data file on the storage under test' })
    .option('method', { type: 'string', default: 'fdatasync', describe: `sync method, or a comma list: ${methodNames.join(', ')}` })
    .option('direct', { type: 'boolean', default: false, describe: 'bypass the OS cache (O_DIRECT, F_NOCACHE, FILE_FLAG_NO_BUFFERING; record size a multiple of 4096)' })
    .option('record-size', { type: 'string', default: '8192', describe: 'bytes per record, a multiple of 512' })
    .option('size', { type: 'string', default: '256MiB', describe: 'data file size; append wraps to the start when full' })
    .option('pattern', { choices: patterns, default: 'append' as const, describe: 'append (file grows) or overwrite (random slots in place)' })
    .option('token', { type: 'string', describe: 'the listener\'s --token' })
    .option('force', { type: 'boolean', default: false, describe: 'replace a file that is not a plugcheck data file' })
    .option('listener-timeout', listenerTimeoutOption)
}

export async function main(argv: readonly string[], io: Io = processIo): Promise<number> {
  let run: (() => Promise<number>) | undefined
  const parser = yargs([...argv])
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
          .option('events', { type: 'string', describe: 'also append every event as a JSON line to this file' })
          .option('campaign', { type: 'string', describe: 'run a power-cut campaign of this name (resumed if the directory holds it)' })
          .option('cycles', { type: 'number', default: undefined, describe: 'campaign: cycles to run (default 10)' })
          .option('cut-command', { type: 'string', describe: 'campaign: the command that cuts the power of the machine under test' })
          .option('cut-after', { type: 'string', describe: 'campaign: MIN-MAX seconds after the writer is steady to cut' })
          .option('reboot-timeout', { type: 'number', describe: 'campaign: seconds to wait for the agent after a cut (default 600)' })
          .option('seed', { type: 'number', describe: 'campaign: seed of the cut moments (default: random, logged)' }),
      (args) => {
        const a = validated(listenArgs, args)
        run = () =>
          runListen(
            {
              host: a.host,
              port: a.port,
              dir: a.dir,
              maxConnections: a.maxConnections,
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
      },
    )
    .command(
      'write',
      'on the machine under test: write synced records and stream their acks to the listener',
      (y) =>
        writeOptions(y)
          .option('duration', { type: 'number', describe: 'seconds to run (default: until killed)' })
          .option('trace-file', { type: 'string', hidden: true, describe: 'lab/bench: log each completed sync to this side file' }),
      (args) => {
        const a = validated(writeArgs, args)
        run = () =>
          runWrite(
            {
              ...writeOptionsOf(a),
              ...(a.duration === undefined ? {} : { durationS: a.duration }),
              ...(a.traceFile === undefined ? {} : { traceFile: resolve(a.traceFile) }),
            },
            io,
          )
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
        const a = validated(agentArgs, args)
        run = () =>
          runAgent(
            { ...writeOptionsOf(a), ...(a.printService === undefined ? {} : { printService: a.printService }) },
            process.argv.slice(2),
            io,
          )
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
          .option('token', { type: 'string', describe: 'the listener\'s --token' })
          .option('host', { type: 'string', describe: 'host name the writer ran on (default: this machine)' })
          .option('listener-timeout', listenerTimeoutOption),
      (args) => {
        const a = validated(verifyArgs, args)
        run = () =>
          runVerify(
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
        const a = validated(demoArgs, args)
        run = () => runDemo({ method: a.method[0]!, killAfterS: a.killAfter, json: a.json }, io)
      },
    )
    .command(
      'bench',
      "pg_test_fsync's tables for this storage, with the environment and a check of which figures are too good to be true",
      (y) =>
        y
          .option('file', { type: 'string', describe: 'scratch file, or a directory to create it in (default: plugcheck-bench.<random> here)' })
          .option('secs', { type: 'number', default: 5, describe: 'seconds per test (fractions allowed)' })
          .option('record-size', { type: 'string', default: '8192', describe: 'bytes per write, a multiple of 512' })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' }),
      (args) => {
        const a = validated(benchArgs, args)
        run = () => runBench({ secsPerTest: a.secs, recordSizeBytes: a.recordSize, json: a.json, ...(a.file === undefined ? {} : { file: a.file }) }, io)
      },
    )
    .command(
      'runs',
      'list the runs a listener holds: host, path, method, acked, started, ended or vanished, verdict',
      (y) =>
        y
          .option('server', { type: 'string', demandOption: true, describe: 'listener HOST[:PORT]' })
          .option('campaign', { type: 'string', describe: 'only the runs of this campaign' })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
          .option('token', { type: 'string', describe: "the listener's --token" })
          .option('listener-timeout', listenerTimeoutOption),
      (args) => {
        const a = validated(runsArgs, args)
        run = () =>
          runRuns(
            { server: a.server, json: a.json, listenerTimeoutMs: a.listenerTimeout, ...(a.token === undefined ? {} : { token: a.token }), ...(a.campaign === undefined ? {} : { campaign: a.campaign }) },
            io,
          )
      },
    )
    .command(
      'report',
      "a campaign's report from a listener's directory: per cycle, per method, per device; --html for a timeline",
      (y) =>
        y
          .option('dir', { type: 'string', demandOption: true, describe: "the listener's --dir (read only)" })
          .option('campaign', { type: 'string', array: true, describe: 'campaign name; several side by side (default: every campaign in the directory)' })
          .option('json', { type: 'boolean', default: false, describe: 'print one JSON document' })
          .option('html', { type: 'string', describe: 'also write a self-contained HTML report to this file' }),
      (args) => {
        const a = validated(reportArgs, args)
        run = () => runReport({ dir: a.dir, json: a.json, ...(a.campaign === undefined ? {} : { campaigns: a.campaign }), ...(a.html === undefined ? {} : { htmlFile: a.html }) }, io)
      },
    )
    .command(
      'methods',
      "this platform's sync methods: available or not and why, the calls each makes, what --direct does",
      (y) => y.option('json', { type: 'boolean', default: false, describe: 'print one JSON document' }),
      (args) => {
        const a = validated(methodsArgs, args)
        run = async () => runMethods({ json: a.json }, io)
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
