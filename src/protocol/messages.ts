/**
 * Wire messages between writer/verifier and listener. Every frame is validated with these schemas
 * on arrival; nothing past this point re-checks shapes. Every field is bounded by what a real run
 * can produce, so a hostile peer (or a hostile listener, seen from verify) cannot make the other side
 * loop, allocate or misjudge without limit.
 *
 * Conversation (writer):   hello -> welcome, run -> run-ok, ack* (-> recorded*), steady?, end -> recorded
 * Conversation (verifier): hello -> welcome, query -> runs, spans -> span-page (the spans a runs reply
 *                          left out, page by page), verdict -> verdict-ok, list -> run-list,
 *                          campaign-query -> campaign-state
 * Any problem:             error, then the listener closes the connection.
 */
import { z } from 'zod'
import { fingerprintSchema } from '../env/fingerprint-schema.js'
import { runMetaSchema } from '../record/format.js'
import { runIdSchema } from '../record/run-id.js'
import { campaignNameSchema, maxTokenChars } from './names.js'
import { maxGroupRuns } from '../record/run-id.js'

/**
 * 2: run carries the writer's environment; runs carries the claims on a path; more error codes.
 * 3: campaigns: steady, verdict, list and campaign-query; run carries an optional campaign tag.
 * 4: hello may carry the client's machine (host name and boot id); a runs reply leaves out the spans
 *    of a long run (ackedThroughSeq says how far they go), read page by page with spans -> span-page.
 */
export const protocolVersion = 4
export { defaultPort } from './default-port.js'
export { campaignNameSchema }

/**
 * No writer produces records faster than this (tmpfs, the fastest case, reaches ~40k/s). Seqs beyond
 * (time since the run was announced) x this rate + slack cannot be real and are refused on both sides.
 */
export const maxRecordsPerSecond = 1_000_000
export const seqSlack = 1_000_000
/** The highest seq a run announced at announcedMs can have acknowledged by atMs. */
export function maxPlausibleSeq(announcedMs: number, atMs: number): number {
  return Math.max(0, Math.floor(((atMs - announcedMs) / 1000) * maxRecordsPerSecond)) + seqSlack
}

const seq = z.number().int().positive().max(Number.MAX_SAFE_INTEGER)
/** Milliseconds since the epoch, from 2000 to 2200: anything else is not a real clock. */
export const epochMsSchema = z.number().int().min(946_684_800_000).max(7_258_118_400_000)

/**
 * The machine a client runs on, as it says in its hello (protocol 4): a machine back with another boot
 * id has lost every writer of its old boot, whatever their connections still look like.
 */
export const machineSchema = z.object({ host: z.string().min(1).max(255), bootId: z.string().min(1).max(64) })
export type Machine = z.infer<typeof machineSchema>

export const helloSchema = z.object({
  type: z.literal('hello'),
  protocol: z.number().int(),
  role: z.enum(['writer', 'verifier']),
  token: z.string().max(maxTokenChars).optional(),
  machine: machineSchema.optional(),
})

/** What the writer's machine was when the run started: verify compares the boot id after the cut. */
export const writerEnvSchema = z.object({
  /** Linux /proc/sys/kernel/random/boot_id; null where the platform offers none. */
  bootId: z.string().min(1).max(64).nullable(),
  /** The environment fingerprint bench prints, for the report; null when it could not be collected. */
  fingerprint: fingerprintSchema.nullable(),
})
export type WriterEnv = z.infer<typeof writerEnvSchema>
/**
 * A run announcement's writer environment, msgpack-encoded, is at most this: a real fingerprint is
 * ~620 bytes (measured on Linux, ext4 and overlay), the writer sends none over 16 KiB, and a listener
 * storing one per run must not take 58 KiB each from a stranger.
 */
export const maxWriterEnvBytes = 17 * 1024

/** Which cycle of which campaign a run belongs to (the agent tags the runs it starts). */
export const campaignTagSchema = z.object({ name: campaignNameSchema, cycle: z.number().int().positive().max(100_000) })
export type CampaignTag = z.infer<typeof campaignTagSchema>

/** A group's secret, shared by the jobs of one `write --jobs N`: a job announcing on a connection of its own proves it belongs to the group. */
export const groupKeySchema = z.string().regex(/^[0-9a-f]{32}$/)
export const runSchema = z.object({
  type: z.literal('run'),
  meta: runMetaSchema,
  writer: writerEnvSchema.optional(),
  campaign: campaignTagSchema.optional(),
  groupKey: groupKeySchema.optional(),
})
/** Seqs fromSeq..toSeq (inclusive) are covered by a sync that returned success. */
export const ackSchema = z
  .object({ type: z.literal('ack'), runId: runIdSchema, fromSeq: seq, toSeq: seq })
  .refine((m) => m.toSeq >= m.fromSeq, { message: 'toSeq is below fromSeq' })
/**
 * How a writer ended a run: its --duration, a signal, a failed write or sync, its data file deleted,
 * replaced or truncated by someone else during the run (verify then judges nothing), or an
 * acknowledged record of its own file read back wrong during the run: the storage lost it (verify
 * judges it). A writer sends storage-lost only to a listener whose welcome carries nowMs (both came
 * in together); to an older one, the same detail as 'error'.
 */
export const endReasons = ['duration', 'interrupted', 'error', 'file-changed', 'storage-lost'] as const
export type EndReason = (typeof endReasons)[number]
export const endSchema = z.object({
  type: z.literal('end'),
  runId: runIdSchema,
  reason: z.enum(endReasons),
  detail: z.string().max(4096).optional(),
})
export const querySchema = z.object({
  type: z.literal('query'),
  host: z.string().min(1).max(255),
  requestedPath: z.string().min(1).max(4096),
  runId: runIdSchema.optional(),
})

/**
 * The spans of a run that a runs reply left out (its ackedThroughSeq set, spans empty): those holding
 * seqs afterSeq+1..throughSeq, answered by one span-page of at most maxSpansPerPage spans; the
 * verifier asks again from where that page ended. Paging by seq, not by index: a live run's spans
 * may be merged between two pages, and the next page still starts at the right seq.
 */
export const spansSchema = z
  .object({
    type: z.literal('spans'),
    runId: runIdSchema,
    afterSeq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    throughSeq: seq,
  })
  .refine((m) => m.throughSeq > m.afterSeq, { message: 'throughSeq is not after afterSeq' })
/** A span on a span-page: toSeq, firstAckMs, lastAckMs as little-endian doubles (span-page.ts). */
export const spanPageEntryBytes = 24
/** Spans per page: 1.5 MiB, a few ms to encode or check, so a page never holds up a listener or a verifier. */
export const maxSpansPerPage = 65_536
/** A runs reply (protocol 4) carries a run's spans up to this many (~100 KiB, ~7 minutes of acks); beyond, they are paged. */
export const maxInlineSpans = 4096

/** The writer has acked for a while and the listener records its acks: the moment to cut. */
export const steadySchema = z.object({ type: z.literal('steady'), runId: runIdSchema })

const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)
export const verdictNames = ['pass', 'fail', 'inconclusive', 'not-judged'] as const

/**
 * What verify found for one run, as the agent (or any verifier) reports it back to the listener after
 * the reboot; stored beside the run and shown by `runs` and `report`.
 */
export const storedVerdictSchema = z.object({
  verdict: z.enum(verdictNames),
  acked: count,
  intact: count,
  lost: count,
  torn: count,
  corrupt: count,
  /**
   * Acknowledged seqs a later acknowledged seq replaced on their slot (not judged), and acknowledged
   * records cut mid-overwrite by a newer, unacknowledged write (not a failure): with them the counts add
   * up to acked exactly (verdict-rules.ts). Absent from verifiers before them.
   */
  superseded: count.optional(),
  interrupted: count.optional(),
  /** The data file's superblock was the run's (false: missing, damaged or another run's); absent from older verifiers. */
  superblockValid: z.boolean().optional(),
  /** The widest time window (ms) between the first and last acknowledgement of a lost range; null with no loss. */
  lossWindowMs: z.number().nonnegative().max(1e12).nullable(),
  /** A later acked record survived while an earlier one did not. */
  reordered: z.boolean(),
  /** The first lost (or torn, or corrupt) seq ranges, for the report's timeline. */
  lostRanges: z.array(z.tuple([seq, seq])).max(100),
  rebootedSinceWrite: z.boolean().nullable(),
  /** One line for people ("PASS: ...", "NOT JUDGED: ..."). */
  summary: z.string().max(4096),
  /** The machine as verify found it after the reboot. */
  bootId: z.string().min(1).max(64).nullable(),
  fingerprint: fingerprintSchema.nullable(),
  atMs: epochMsSchema,
})
export type StoredVerdict = z.infer<typeof storedVerdictSchema>
export const verdictSchema = z.object({ type: z.literal('verdict'), runId: runIdSchema, result: storedVerdictSchema })

/** Every run the listener holds (newest first), optionally only one campaign's. */
export const listSchema = z.object({ type: z.literal('list'), campaign: campaignNameSchema.optional() })
/** The listener's campaign, if it runs one: the agent asks before it starts the next cycle. */
export const campaignQuerySchema = z.object({ type: z.literal('campaign-query') })

export const clientMessageSchema = z.discriminatedUnion('type', [
  helloSchema,
  runSchema,
  ackSchema,
  endSchema,
  querySchema,
  steadySchema,
  verdictSchema,
  listSchema,
  campaignQuerySchema,
  spansSchema,
])
export type ClientMessage = z.infer<typeof clientMessageSchema>

/** [fromSeq, toSeq, firstAckMs, lastAckMs]: seqs acknowledged, and when the listener received them. */
export const ackSpanSchema = z
  .tuple([seq, seq, epochMsSchema, epochMsSchema])
  .refine((s) => s[1] >= s[0] && s[3] >= s[2], { message: 'span runs backwards' })
export type AckSpan = z.infer<typeof ackSpanSchema>

/** How a run ended, as the listener saw it. 'vanished': the writer's connection closed without an end. */
export const runEndSchema = z.object({
  reason: z.enum([...endReasons, 'vanished']),
  detail: z.string().max(4096).optional(),
  atMs: epochMsSchema,
})

/** Spans are capped: a week at one span per 100 ms. */
export const maxStoredSpans = 7 * 24 * 36_000

export const storedRunSchema = z
  .object({
    meta: runMetaSchema,
    announcedMs: epochMsSchema,
    /** The address the run was announced from, as the listener saw it ("10.0.0.7", "::1"). */
    peer: z.string().max(64).optional(),
    writer: writerEnvSchema.optional(),
    /** The listener required a token and the writer presented it. */
    authenticated: z.boolean().optional(),
    end: runEndSchema.optional(),
    /** The listener holds a verifier's verdict for the run (protocol 4; write's evidence check asks). */
    verified: z.boolean().optional(),
    /** Contiguous from seq 1, in order: the listener accepts acks only in order. */
    spans: z.array(ackSpanSchema).max(maxStoredSpans),
    /**
     * The last acknowledged seq (protocol 4). A long run's spans are left out of a runs reply (spans
     * empty) and read page by page (spans -> span-page); with spans given, it is where they end.
     */
    ackedThroughSeq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
    /**
     * When the listener received the run's last ack (protocol 4): with a long run's spans left out,
     * what still bounds the write times of its records (how long the run went on by the listener's clock).
     */
    lastAckMs: epochMsSchema.optional(),
  })
  .superRefine((run, ctx) => {
    const lastSeq = run.spans.at(-1)?.[1]
    if (run.ackedThroughSeq !== undefined && lastSeq !== undefined && lastSeq !== run.ackedThroughSeq) {
      ctx.addIssue({ code: 'custom', path: ['ackedThroughSeq'], message: `the spans end at seq ${lastSeq}, not ${run.ackedThroughSeq}` })
      return
    }
    let expected = 1
    for (const [i, span] of run.spans.entries()) {
      if (span[0] !== expected) {
        ctx.addIssue({ code: 'custom', path: ['spans', i], message: `span starts at seq ${span[0]}, expected ${expected}` })
        return
      }
      if (span[2] < run.announcedMs - 60_000) {
        ctx.addIssue({ code: 'custom', path: ['spans', i], message: 'span acknowledged before its run was announced' })
        return
      }
      if (span[1] > maxPlausibleSeq(run.announcedMs, span[3])) {
        ctx.addIssue({ code: 'custom', path: ['spans', i], message: `seq ${span[1]} is more than a writer can have written by then` })
        return
      }
      expected = span[1] + 1
    }
  })
export type StoredRun = z.infer<typeof storedRunSchema>

/** Another run that claims the same host and path: verify names them instead of blaming the storage. */
export const claimSchema = z.object({
  runId: runIdSchema,
  groupId: runIdSchema,
  method: z.string().max(64),
  announcedMs: epochMsSchema,
  peer: z.string().max(64).optional(),
  authenticated: z.boolean().optional(),
  /** The writer's connection is open now. */
  live: z.boolean(),
  end: runEndSchema.optional(),
  ackedThroughSeq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
})
export type Claim = z.infer<typeof claimSchema>

export const errorCodes = [
  'bad-frame',
  'too-large',
  'out-of-order',
  'unauthorized',
  'unknown-run',
  'protocol-version',
  'storage',
  /** Another connection's run for this host and path is live. */
  'path-busy',
  /** --max-connections reached, hello not sent in time, or too many ends/queries. */
  'limit',
] as const
export type ErrorCode = (typeof errorCodes)[number]

/** One line of `plugcheck runs`. */
export const runSummarySchema = z.object({
  runId: runIdSchema,
  groupId: runIdSchema,
  host: z.string().max(255),
  path: z.string().max(4096),
  method: z.string().max(64),
  announcedMs: epochMsSchema,
  peer: z.string().max(64).optional(),
  live: z.boolean(),
  end: runEndSchema.optional(),
  ackedThroughSeq: count,
  steadyMs: epochMsSchema.nullable(),
  verdict: storedVerdictSchema.nullable(),
  campaign: campaignTagSchema.nullable(),
})
export type RunSummary = z.infer<typeof runSummarySchema>
export const maxListedRuns = 1000

export const campaignPhases = ['waiting-for-writer', 'waiting-to-cut', 'cutting', 'waiting-for-agent', 'done', 'stopped'] as const
/** What the agent needs to know of the listener's campaign. */
export const campaignStateSchema = z.object({
  name: campaignNameSchema,
  cycles: z.number().int().positive().max(100_000),
  /** The cycle under way (1-based); cycles + 1 once done. */
  cycle: z.number().int().positive().max(100_001),
  phase: z.enum(campaignPhases),
  detail: z.string().max(4096).optional(),
})
export type CampaignState = z.infer<typeof campaignStateSchema>

export const serverMessageSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('welcome'),
    protocol: z.number().int(),
    listenerId: z.string().max(64),
    /**
     * The listener's clock (ms since the epoch) when it answered; absent from older listeners. The
     * machine that keeps power keeps time too: a writer takes its run's time base from it. Any number
     * is accepted here (a listener at 1970 is still a listener); the writer checks it is a real time.
     */
    nowMs: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  }),
  z.object({ type: z.literal('run-ok'), runId: runIdSchema }),
  z.object({ type: z.literal('recorded'), runId: runIdSchema, throughSeq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER) }),
  z.object({
    type: z.literal('runs'),
    runs: z.array(storedRunSchema).max(maxGroupRuns),
    /** Every run on record for the queried host and path (newest first, at most maxGroupRuns). */
    claims: z.array(claimSchema).max(maxGroupRuns),
  }),
  z.object({ type: z.literal('error'), code: z.enum(errorCodes), message: z.string().max(4096) }),
  z.object({ type: z.literal('verdict-ok'), runId: runIdSchema }),
  z.object({ type: z.literal('run-list'), runs: z.array(runSummarySchema).max(maxListedRuns), truncated: z.boolean() }),
  z.object({ type: z.literal('campaign-state'), campaign: campaignStateSchema.nullable() }),
  z.object({
    type: z.literal('span-page'),
    runId: runIdSchema,
    /** The page holds the spans from seq afterSeq + 1 on (as asked). */
    afterSeq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    spans: z
      .custom<Uint8Array>((b) => b instanceof Uint8Array, { message: 'not bytes' })
      .refine((b) => b.length % spanPageEntryBytes === 0 && b.length <= maxSpansPerPage * spanPageEntryBytes, {
        message: `not whole spans of ${spanPageEntryBytes} bytes, or more than ${maxSpansPerPage} of them`,
      }),
  }),
])
export type ServerMessage = z.infer<typeof serverMessageSchema>
