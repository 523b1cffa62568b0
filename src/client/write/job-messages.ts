/** What the main thread of `write --jobs N` and its jobs (job-worker.ts) say to each other. */
import type { StopSignal } from './stop-signals.js'
import type { WriteOptions, WriteProgress } from './write-options.js'

/** What the main thread hands a job. */
export interface JobData {
  readonly options: WriteOptions
  readonly statusTty: boolean
}

/** What a job tells the main thread. */
export type JobMessage =
  | { readonly kind: 'out'; readonly text: string }
  | { readonly kind: 'err'; readonly text: string }
  | { readonly kind: 'progress'; readonly progress: WriteProgress }
  /** At the start barrier: runs announced and files created, or (failure) why its start failed; its announced runs are ended. */
  | { readonly kind: 'ready'; readonly failure?: string }
  | {
      readonly kind: 'done'
      readonly exitCode: number
      readonly error?: { readonly message: string; readonly exitCode: 2 | 3; readonly hint?: string }
    }

/**
 * What the main thread tells a job: a signal to act on as if it had received it, or go (every job is
 * past its start; groupFailure: one of them could not start, so none writes and every run ends saying why).
 */
/** signal: stop as on that signal; because says why when no one sent it (another job failed), for the runs' end. */
export type JobCommand =
  | { readonly kind: 'signal'; readonly signal: StopSignal; readonly because?: string }
  | { readonly kind: 'go'; readonly groupFailure?: string }

/** A job's end, as it reported it (or as the main thread saw its thread fail or exit). */
export type JobResult = Extract<JobMessage, { kind: 'done' }>
