/**
 * What a client tells the listener about its machine: the boot id (verify compares it to tell a reboot)
 * and the environment fingerprint. write, verify and agent send it; nothing here may fail a run.
 */
import { nativePort } from '../native/index.js'
import { encodeFrame } from '../protocol/framing.js'
import { writerEnvSchema, type WriterEnv } from '../protocol/messages.js'
import { collectFingerprint } from '../env/fingerprint.js'

/** A fingerprint is a few KiB; one bigger than this is not sent (a client frame is at most 64 KiB). */
const maxFingerprintFrameBytes = 16 * 1024

/** Boot id and environment fingerprint for the listener; anything that cannot be collected is null. */
export function writerEnvironment(directory: string): WriterEnv {
  let bootId: string | null = null
  try {
    bootId = nativePort().bootId() // null where the platform has none: verify then says it cannot tell
  } catch {
    bootId = null
  }
  let fingerprint: WriterEnv['fingerprint'] = null
  try {
    fingerprint = collectFingerprint(directory, nativePort().fileSystemOf(directory))
  } catch {
    fingerprint = null
  }
  const env = writerEnvSchema.safeParse({ bootId, fingerprint })
  if (!env.success) return { bootId: writerEnvSchema.shape.bootId.safeParse(bootId).success ? bootId : null, fingerprint: null }
  if (env.data.fingerprint !== null && encodeFrame(env.data.fingerprint).length > maxFingerprintFrameBytes)
    return { bootId: env.data.bootId, fingerprint: null }
  return env.data
}
