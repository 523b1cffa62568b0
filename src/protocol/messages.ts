/**
 * Wire messages between writer/verifier and listener. Every frame is validated with these schemas
 * on arrival; nothing past this point re-checks shapes.
 *
 * Conversation (writer):   hello -> welcome, run -> run-ok, ack* (-> recorded*), end -> recorded
 * Conversation (verifier): hello -> welcome, query -> runs
 * Any problem:             error, then the listener closes the connection.
 */
import { z } from 'zod'
import { runIdSchema, runMetaSchema } from '../record/format.js'

export const protocolVersion = 1
export const defaultPort = 5400

const seq = z.number().int().positive().max(Number.MAX_SAFE_INTEGER)

export const helloSchema = z.object({
  type: z.literal('hello'),
  protocol: z.number().int(),
  role: z.enum(['writer', 'verifier']),
  token: z.string().max(1024).optional(),
})
export const runSchema = z.object({ type: z.literal('run'), meta: runMetaSchema })
/** Seqs fromSeq..toSeq (inclusive) are covered by a sync that returned success. */
export const ackSchema = z.object({ type: z.literal('ack'), runId: runIdSchema, fromSeq: seq, toSeq: seq }).refine(
  (m) => m.toSeq >= m.fromSeq,
  { message: 'toSeq is below fromSeq' },
)
export const endSchema = z.object({
  type: z.literal('end'),
  runId: runIdSchema,
  reason: z.enum(['duration', 'interrupted', 'error']),
  detail: z.string().max(4096).optional(),
})
export const querySchema = z.object({
  type: z.literal('query'),
  host: z.string().min(1).max(255),
  requestedPath: z.string().min(1).max(4096),
  runId: runIdSchema.optional(),
})

export const clientMessageSchema = z.discriminatedUnion('type', [helloSchema, runSchema, ackSchema, endSchema, querySchema])
export type ClientMessage = z.infer<typeof clientMessageSchema>

/** [fromSeq, toSeq, firstAckMs, lastAckMs]: seqs acknowledged, and when the listener received them. */
export const ackSpanSchema = z.tuple([seq, seq, z.number().nonnegative(), z.number().nonnegative()])
export type AckSpan = z.infer<typeof ackSpanSchema>

export const storedRunSchema = z.object({
  meta: runMetaSchema,
  announcedMs: z.number().nonnegative(),
  end: z.object({ reason: z.string(), detail: z.string().optional(), atMs: z.number() }).optional(),
  spans: z.array(ackSpanSchema),
})
export type StoredRun = z.infer<typeof storedRunSchema>

export const errorCodes = ['bad-frame', 'too-large', 'out-of-order', 'unauthorized', 'unknown-run', 'protocol-version', 'storage'] as const

export const serverMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('welcome'), protocol: z.number().int(), listenerId: z.string() }),
  z.object({ type: z.literal('run-ok'), runId: runIdSchema }),
  z.object({ type: z.literal('recorded'), runId: runIdSchema, throughSeq: z.number().int().nonnegative() }),
  z.object({ type: z.literal('runs'), runs: z.array(storedRunSchema) }),
  z.object({ type: z.literal('error'), code: z.enum(errorCodes), message: z.string() }),
])
export type ServerMessage = z.infer<typeof serverMessageSchema>
