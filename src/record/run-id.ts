/**
 * A run's id, apart from format.ts so the command line can validate `verify --run` with zod alone,
 * without loading the record codec (msgpackr, xxhash): bench/startup.ts.
 */
import { z } from 'zod'

export const runIdSchema = z.string().regex(/^[0-9a-f]{16}$/, 'a run id is 16 lower-case hex digits')
