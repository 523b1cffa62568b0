/**
 * xxh64 with seed 0: the checksum of superblocks, records (format.ts) and ack-log entries
 * (ack-log.ts).
 *
 * A data file or ack log written on one platform must verify on any other, so every platform computes
 * the same function. The native build (@node-rs/xxhash) is used where it loads; where it does not (its
 * Windows .node needs the MSVC runtime DLLs, absent under Wine and on a bare Windows), the WebAssembly
 * build (xxhash-wasm's h64Raw, the same XXH64 from the reference algorithm) takes over. The wasm module
 * is compiled by a top-level await only when the native one failed, so Linux pays nothing for it.
 */

/** XXH64(bytes, seed 0) as an unsigned 64-bit value. */
export type Hash64 = (bytes: Uint8Array) => bigint

/** The WebAssembly XXH64; exported so tests can compare it with the native one on the same inputs. */
export async function loadWasmXxh64(): Promise<Hash64> {
  const { default: xxhash } = await import('xxhash-wasm')
  const api = await xxhash()
  return (bytes) => api.h64Raw(bytes, 0n)
}

/** The native XXH64, or null (with why) where its binary does not load on this platform. */
export async function loadNativeXxh64(): Promise<{ readonly hash: Hash64 } | { readonly hash: null; readonly reason: string }> {
  try {
    const native = await import('@node-rs/xxhash')
    // Seed 0 is the native default; binding it keeps a stray second argument from ever becoming a seed.
    return { hash: (bytes) => native.xxh64(bytes) }
  } catch (error) {
    return { hash: null, reason: error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error) }
  }
}

const native = await loadNativeXxh64()

/** Which build computes xxh64 in this process. */
export const checksumImplementation: 'native' | 'wasm' = native.hash ? 'native' : 'wasm'

export const xxh64: Hash64 = native.hash ?? (await loadWasmXxh64())
