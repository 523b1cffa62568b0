/**
 * The flags of each command, validated with zod after yargs has parsed them. Loaded only when a
 * command runs: zod and these schemas cost more start-up than `--help` itself (bench/startup.ts).
 */
import { resolve } from 'node:path'
import { z } from 'zod'
import { parseEndpoint } from '../protocol/endpoint.js'
import type { WriteOptions } from '../client/write/write-options.js'
import { usageError } from '../base/errors.js'
import { isMethodName, methodNames, type MethodName } from '../native/methods.js'
import { campaignNameSchema, maxGroupRuns } from '../protocol/names.js'
import { runIdSchema } from '../record/run-id.js'
import { patterns, publishWays } from '../record/patterns.js'
import { maxKeptFiles } from '../record/files-layout.js'
import { parseSize } from '../base/sizes.js'
import { parseDuration, parseSecondsFlag, secondsFlagForms } from '../base/durations.js'
import { tokenOfFlags } from './token-file.js'
import { closestName } from './strict-flags.js'

export { tokenOfFlags }

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
  const names = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  if (names.length === 0) ctx.addIssue({ code: 'custom', message: '--method is empty' })
  for (const name of names) {
    if (isMethodName(name)) continue
    const meant = closestName(name, methodNames)
    const didYouMean = meant === undefined ? '' : ` (did you mean ${meant}?)`
    ctx.addIssue({ code: 'custom', message: `unknown method ${name}${didYouMean} (known: ${methodNames.join(', ')})` })
  }
  return names as MethodName[]
})

/** A byte bound: a size, or none (no bound). */
const boundArg = (flag: string) =>
  z.string().transform((text, ctx) => {
    if (text.trim() === 'none') return null
    const bytes = parseSize(text)
    if (bytes === null || bytes <= 0) {
      ctx.addIssue({ code: 'custom', message: `${flag} ${text} is not a size (examples: 20GiB, 512M, or none)` })
      return z.NEVER
    }
    return bytes
  })

/** --reserve: a size (1GiB) or a percentage of the file system (5%). */
const reserveArg = z.string().transform((text, ctx) => {
  const percent = /^\s*(-?\d+(?:\.\d+)?)\s*%\s*$/.exec(text)
  if (percent !== null && Number(percent[1]) >= 0 && Number(percent[1]) <= 100) return { percent: Number(percent[1]) }
  const bytes = percent === null ? parseSize(text) : null
  if (bytes === null || !Number.isSafeInteger(bytes)) {
    const why = /^\s*-/.test(text) ? 'is negative: give' : percent !== null ? 'is over 100%: give' : 'is not'
    ctx.addIssue({
      code: 'custom',
      message: `--reserve ${text} ${why} a size or a percentage from 0 to 100% (examples: 1GiB, 512M, 5%, 0)`,
    })
    return z.NEVER
  }
  return { bytes }
})

/** A duration flag: 30d, 12h, 90m, 45s. */
const durationArg = (flag: string) =>
  z.string().transform((text, ctx) => {
    const ms = parseDuration(text)
    if (ms === null) {
      ctx.addIssue({ code: 'custom', message: `${flag} ${text} is not a duration (examples: 30d, 12h, 90m, 45s)` })
      return z.NEVER
    }
    return ms
  })

/** The largest --max-runs and --max-runs-per-peer. */
const maxRunBound = 100_000_000
const runBoundArg = (flag: string) =>
  z
    .number({ message: `${flag} must be a whole number` })
    .int(`${flag} must be a whole number`)
    .min(1, `${flag} must be at least 1`)
    .max(maxRunBound, `${flag} is at most ${maxRunBound.toLocaleString('en-US')}`)

/**
 * A flag that counts seconds: a plain number (10, 0.5) or a number and a unit (2s, 5m, 1h, 1d),
 * positive, at most maxS when given; its value in seconds. yargs passes it as text (a default as a number).
 */
const secondsArg = (flag: string, maxS?: number, maxWhy = '') =>
  z.union([z.string(), z.number()]).transform((value, ctx) => {
    const seconds = parseSecondsFlag(value)
    const issue = (message: string): typeof z.NEVER => {
      ctx.addIssue({ code: 'custom', message })
      return z.NEVER
    }
    if (seconds === null) return issue(`${flag} ${value === '' ? 'needs a value' : `${value} is not a duration`}: give ${secondsFlagForms}`)
    if (seconds <= 0) return issue(`${flag} must be positive`)
    if (maxS !== undefined && seconds > maxS) return issue(`${flag} is at most ${maxS} seconds${maxWhy} (${value} is ${seconds} s)`)
    return seconds
  })

/** --listener-timeout SECONDS, for write and verify: default 10; kept in whole milliseconds, so at least one (never a wait of 0). */
const listenerTimeoutArg = secondsArg('--listener-timeout', 3600)
  .refine((s) => s >= 0.001, '--listener-timeout is at least 0.001 seconds (one millisecond)')
  .transform((s) => Math.round(s * 1000))

/** --token T: never empty (a token file cannot hold an empty token, so the agent's unit could never get in). */
const tokenArg = z.string().min(1, '--token is empty: give the listener a token, or leave out --token')

/** --token-file PATH, made absolute (read by tokenOfFlags when the command runs). */
const tokenFileArg = z
  .string()
  .min(1)
  .transform((p) => resolve(p))

/** --jobs N: a verify judges at most maxGroupRuns runs of one write (with several methods, validateWriteFlags bounds jobs x methods). */

const writeArgs = z.object({
  server: endpointArg,
  file: z
    .string()
    .min(1)
    .transform((p) => resolve(p)),
  method: methodsArg,
  direct: z.boolean(),
  recordSize: sizeArg('--record-size'),
  size: sizeArg('--size'),
  pattern: z.enum(patterns),
  dirSync: z.boolean().optional(),
  publish: z.enum(publishWays).optional(),
  keepFiles: z
    .number({ message: `--keep-files must be a whole number from 1 to ${maxKeptFiles}` })
    .int(`--keep-files must be a whole number from 1 to ${maxKeptFiles}`)
    .min(1, '--keep-files must be at least 1')
    .max(maxKeptFiles, `--keep-files is at most ${maxKeptFiles}`)
    .optional(),
  duration: secondsArg('--duration').optional(),
  token: tokenArg.optional(),
  tokenFile: tokenFileArg.optional(),
  force: z.boolean(),
  discardUnverified: z.boolean(),
  json: z.boolean(),
  traceFile: z.string().optional(),
  listenerTimeout: listenerTimeoutArg,
  jobs: z
    .number({ message: `--jobs must be a whole number from 1 to ${maxGroupRuns}` })
    .int(`--jobs must be a whole number from 1 to ${maxGroupRuns}`)
    .min(1, '--jobs must be at least 1')
    .max(maxGroupRuns, `--jobs is at most ${maxGroupRuns} (a verify judges at most ${maxGroupRuns} runs of one write)`),
})

const agentArgs = writeArgs
  .omit({ duration: true, traceFile: true, discardUnverified: true, json: true })
  .extend({ printService: z.enum(['systemd', 'windows']).optional() })

const verifyArgs = z
  .object({
    server: endpointArg.optional(),
    acks: z.string().min(1).optional(),
    file: z
      .string()
      .min(1)
      .transform((p) => resolve(p)),
    run: runIdSchema.optional(),
    json: z.boolean(),
    token: tokenArg.optional(),
    tokenFile: tokenFileArg.optional(),
    host: z.string().min(1).optional(),
    listenerTimeout: listenerTimeoutArg,
  })
  .refine((a) => (a.server === undefined) !== (a.acks === undefined), { message: 'give exactly one of --server HOST[:PORT] or --acks DIR' })

/** --cut-after MIN-MAX in seconds ("30-90", "45", "30s-2m": each end a seconds flag's value). */
const cutAfterArg = z.string().transform((text, ctx) => {
  const match = /^([^-]+)(?:-([^-]+))?$/.exec(text.trim())
  const min = match === null ? null : parseSecondsFlag(match[1]!)
  const max = match === null ? null : parseSecondsFlag(match[2] ?? match[1]!)
  if (min === null || max === null || min < 0 || max < min || max > 86_400) {
    ctx.addIssue({
      code: 'custom',
      message: `--cut-after ${text}: give MIN-MAX seconds after the writer is steady, e.g. 30-90 or 30s-2m (at most 86400 s, 1d)`,
    })
    return z.NEVER
  }
  return [min, max] as [number, number]
})

const listenArgs = z
  .object({
    host: z.string().min(1),
    port: z.number().int().min(0).max(65535),
    dir: z.string().min(1),
    token: tokenArg.optional(),
    maxConnections: z
      .number()
      .int('--max-connections must be a whole number')
      .min(1, '--max-connections must be at least 1')
      .max(1_000_000),
    maxPendingHellos: z
      .number()
      .int('--max-pending-hellos must be a whole number')
      .min(1, '--max-pending-hellos must be at least 1')
      .max(1_000_000),
    maxRuns: runBoundArg('--max-runs'),
    maxRunsPerPeer: runBoundArg('--max-runs-per-peer'),
    maxStoreBytes: boundArg('--max-store-bytes'),
    maxStoreBytesPerPeer: boundArg('--max-store-bytes-per-peer'),
    reserve: reserveArg.optional(),
    retain: durationArg('--retain').optional(),
    events: z.string().min(1).optional(),
    campaign: campaignNameSchema.optional(),
    cycles: z.number().int('--cycles must be a whole number').min(1, '--cycles must be at least 1').max(100_000).optional(),
    cutCommand: z.string().min(1).max(4096).optional(),
    cutAfter: cutAfterArg.optional(),
    rebootTimeout: secondsArg('--reboot-timeout', 86_400).optional(),
    seed: z
      .number()
      .int()
      .nonnegative()
      .max(2 ** 32 - 1)
      .optional(),
  })
  .superRefine((a, ctx) => {
    const campaignFlags = [a.cycles, a.cutCommand, a.cutAfter, a.rebootTimeout, a.seed].some((v) => v !== undefined)
    if (a.campaign === undefined && campaignFlags)
      ctx.addIssue({ code: 'custom', message: '--cycles, --cut-command, --cut-after, --reboot-timeout and --seed need --campaign NAME' })
    if (a.campaign !== undefined && (a.cutCommand === undefined || a.cutAfter === undefined)) {
      ctx.addIssue({ code: 'custom', message: '--campaign needs --cut-command CMD and --cut-after MIN-MAX' })
    }
  })

const runsArgs = z
  .object({
    server: endpointArg.optional(),
    json: z.boolean(),
    token: tokenArg.optional(),
    tokenFile: tokenFileArg.optional(),
    campaign: campaignNameSchema.optional(),
    listenerTimeout: listenerTimeoutArg,
    prune: z.boolean(),
    olderThan: durationArg('--older-than').optional(),
    dir: z
      .string()
      .min(1)
      .transform((p) => resolve(p))
      .optional(),
    dryRun: z.boolean(),
  })
  .superRefine((a, ctx) => {
    const issue = (message: string): void => ctx.addIssue({ code: 'custom', message })
    if (!a.prune) {
      if (a.server === undefined) issue('give --server HOST[:PORT] (or --prune --dir DIR --older-than AGE)')
      if (a.olderThan !== undefined || a.dir !== undefined || a.dryRun) issue('--older-than, --dir and --dry-run go with --prune')
      return
    }
    if (a.dir === undefined)
      issue("--prune needs --dir DIR, the listener's directory (pruning runs where it is, with the listener stopped)")
    if (a.olderThan === undefined) issue('--prune needs --older-than AGE (examples: 30d, 12h): only runs that ended longer ago are pruned')
    if (a.server !== undefined || a.token !== undefined || a.tokenFile !== undefined)
      issue('--prune works on --dir, not through --server or --token')
  })

const reportArgs = z.object({
  dir: z
    .string()
    .min(1)
    .transform((p) => resolve(p)),
  campaign: z.array(campaignNameSchema).optional(),
  json: z.boolean(),
  html: z
    .string()
    .min(1)
    .transform((p) => resolve(p))
    .optional(),
})

const demoArgs = z.object({
  method: methodsArg.refine((m) => m.length === 1, { message: 'demo takes one --method' }),
  killAfter: secondsArg('--kill-after', 600),
  json: z.boolean(),
})

/** --record-size for bench: whole sectors, and two records must fit the 16 MiB test region many times over. */
const maxBenchRecordSizeBytes = 1024 * 1024
const benchArgs = z.object({
  file: z.string().min(1).optional(),
  secs: secondsArg('--secs', 3600, ' per test'),
  recordSize: sizeArg('--record-size').refine((bytes) => bytes % 512 === 0 && bytes <= maxBenchRecordSizeBytes, {
    message: `--record-size must be a multiple of 512 bytes, at most ${maxBenchRecordSizeBytes / 1024} KiB`,
  }),
  json: z.boolean(),
})

const methodsArgs = z.object({ json: z.boolean() })

const commandSchemas = {
  listen: listenArgs,
  write: writeArgs,
  agent: agentArgs,
  verify: verifyArgs,
  demo: demoArgs,
  bench: benchArgs,
  runs: runsArgs,
  report: reportArgs,
  methods: methodsArgs,
}
export type CommandName = keyof typeof commandSchemas
export type CommandFlags<C extends CommandName> = z.output<(typeof commandSchemas)[C]>

/** A command's flags as yargs parsed them, validated; a usage error (exit 2) names every bad flag. */
export function validate<C extends CommandName>(command: C, args: unknown): CommandFlags<C> {
  const parsed = commandSchemas[command].safeParse(args)
  if (!parsed.success) {
    const flag = (key: PropertyKey): string => `--${String(key).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
    const messages = parsed.error.issues.map((i) =>
      i.path.length > 0 && !/^(--|unknown method)/.test(i.message) ? `${flag(i.path[0]!)}: ${i.message}` : i.message,
    )
    throw usageError(messages.join('; '))
  }
  return parsed.data as CommandFlags<C>
}

/** The flags of --pattern files, refused (exit 2) with any other pattern: they would silently do nothing. */
function filesOptionsOf(a: CommandFlags<'agent'>): Pick<WriteOptions, 'files'> {
  const given = [
    a.dirSync === undefined ? null : a.dirSync ? '--dir-sync' : '--no-dir-sync',
    a.publish === undefined ? null : '--publish',
    a.keepFiles === undefined ? null : '--keep-files',
  ].filter((flag) => flag !== null)
  if (a.pattern !== 'files') {
    if (given.length > 0)
      throw usageError(
        `${given.join(', ')} ${given.length === 1 ? 'is' : 'are'} for --pattern files only`,
        'add --pattern files, or leave them out',
      )
    return {}
  }
  return {
    files: { dirSync: a.dirSync ?? true, publish: a.publish ?? 'rename', ...(a.keepFiles === undefined ? {} : { keepFiles: a.keepFiles }) },
  }
}

/** What `write` and `agent` share, from their validated flags; a --token-file is read here. */
export function writeOptionsOf(a: CommandFlags<'agent'>): Omit<WriteOptions, 'durationS' | 'traceFile'> {
  const token = tokenOfFlags(a)
  return {
    ...filesOptionsOf(a),
    server: a.server,
    file: a.file,
    methods: a.method,
    direct: a.direct,
    recordSizeBytes: a.recordSize,
    sizeBytes: a.size,
    pattern: a.pattern,
    force: a.force,
    listenerTimeoutMs: a.listenerTimeout,
    ...(token === undefined ? {} : { token }),
    ...(a.jobs === 1 ? {} : { jobs: a.jobs }),
  }
}
