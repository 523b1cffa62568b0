/**
 * A run's id, apart from format.ts so the command line can validate `verify --run` with zod alone,
 * without loading the record codec (msgpackr, xxhash): bench/startup.ts.
 */
import { z } from 'zod'

export const runIdSchema = z.string().regex(/^[0-9a-f]{16}$/, 'a run id is 16 lower-case hex digits')

/**
 * The most runs one group holds: one write makes jobs x methods runs, announced on one connection,
 * and one verify judges them together from one listener answer (its claims). Every bound on runs of a
 * group (--jobs, the superblock's job fields, a campaign cycle's runs, a query reply) is this one.
 */
export const maxGroupRuns = 64
