/**
 * Campaign names and the claims bound, apart from messages.ts so the command line can validate its
 * flags with zod alone, without loading the wire codec (msgpackr, xxhash): bench/startup.ts.
 */
import { z } from 'zod'
import { maxGroupRuns } from '../record/run-id.js'

export { maxGroupRuns }

/** The longest --token a hello carries (characters); --token-file reads no more. */
export const maxTokenChars = 1024

/** A campaign's name: what `listen --campaign` and the report call it. */
export const campaignNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'a campaign name is 1-64 letters, digits, dots, dashes or underscores')
