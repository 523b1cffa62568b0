/**
 * The checksum is one function on every platform: the native build (Linux, macOS, BSD) and the
 * WebAssembly build (Windows, where the native one does not load) must agree on every input, or a
 * data file written on one platform would fail verify on another.
 */
import t from 'tap'
import { checksumImplementation, loadNativeXxh64, loadWasmXxh64, xxh64, type Hash64 } from '../../../src/record/checksum.js'

const native = await loadNativeXxh64()
const wasm = await loadWasmXxh64()

/** Seeded xorshift32, so a failing input can be replayed from the seed in the message. */
function randomBytes(seed: number, length: number): Buffer {
  let state = seed >>> 0 || 1
  const out = Buffer.alloc(length)
  for (let i = 0; i < length; i++) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    state >>>= 0
    out[i] = state & 0xff
  }
  return out
}

// The reference XXH64 vectors (seed 0), as published with xxHash (xxhsum of the empty string, "a", "abc")
// and reproduced by every port.
const vectors: [string, bigint][] = [
  ['', 0xef46db3751d8e999n],
  ['a', 0xd24ec4f1a98c6e5bn],
  ['abc', 0x44bc2cf5ad770999n],
]

/** The build each platform uses: the native one does not load on Windows (PLATFORMS.md), so it uses the wasm one. */
const buildInUse = process.platform === 'win32' ? 'wasm' : 'native'
/** Why a native build that should load did not, and how to get it. */
const nativeMissing =
  native.hash === null
    ? `the native build does not load here: ${native.reason}\nhint: npm ci installs @node-rs/xxhash and its build for this platform`
    : ''

t.test(`the build in use is the platform's own (${buildInUse} on ${process.platform})`, async (t) => {
  t.equal(checksumImplementation, buildInUse)
  if (buildInUse === 'native') t.not(native.hash, null, nativeMissing)
  else t.equal(native.hash, null, 'the native build does not load on Windows')
})

t.test('both builds give the reference values', async (t) => {
  const builds: [string, Hash64][] = [
    ['wasm', wasm],
    ['in use', xxh64],
  ]
  if (native.hash) builds.push(['native', native.hash])
  for (const [name, hash] of builds) {
    for (const [input, want] of vectors) t.equal(hash(Buffer.from(input, 'latin1')), want, `${name} xxh64(${JSON.stringify(input)})`)
  }
})

t.test('native and wasm agree on random buffers of every length class', async (t) => {
  // On Windows only wasm loads: test/windows/toolchain.test.ts compares it there with the Linux build.
  if (buildInUse === 'wasm') return void t.equal(native.hash, null, 'no native build to compare on Windows')
  if (native.hash === null) return void t.fail(nativeMissing)
  const edgeLengths = [0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 511, 512, 513, 4095, 4096, 4097, 8192, 65536 + 3]
  let compared = 0
  let mismatches = 0
  for (let seed = 1; seed <= 3000; seed++) {
    // Every edge length once per 24 seeds, otherwise lengths up to 2 KiB.
    const length = seed % 2 === 0 ? edgeLengths[(seed / 2) % edgeLengths.length]! : seed % 2048
    const bytes = randomBytes(seed, length)
    if (native.hash!(bytes) !== wasm(bytes)) {
      mismatches++
      if (mismatches <= 3) t.fail(`seed ${seed}, length ${length}: native and wasm differ`)
    }
    compared++
  }
  t.equal(mismatches, 0, `${compared} buffers compared`)
  t.equal(compared, 3000)
})

t.test('a view into a larger buffer hashes only its own bytes', async (t) => {
  const whole = randomBytes(42, 10_000)
  const view = whole.subarray(1234, 1234 + 4099)
  const copy = Buffer.from(view)
  t.equal(wasm(view), wasm(copy), 'wasm')
  t.equal(xxh64(view), xxh64(copy), 'in use')
  if (native.hash) t.equal(native.hash(view), wasm(view), 'native = wasm on a view')
})
