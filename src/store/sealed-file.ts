/**
 * The listener's files stored whole and checksummed: a run's meta.msgpack and verdict.msgpack, and
 * <dir>/catalog.msgpack (catalog.ts).
 *
 *   [8 bytes magic: 0xc1, "PC", 4 letters of the file's kind, format 0x02][u64 LE xxh64 of body][body: msgpack]
 *
 * 0xc1 is the one byte msgpack never uses, so a sealed file cannot be read as a bare msgpack value,
 * and a file that does not start with it is one written before files were sealed: a bare msgpack map
 * (legacy), read as it is, without a checksum. A bit flipped in the magic leaves neither: its body is
 * then not what its schema asks for, and refused like any damage.
 *
 * Fault model: a disk may return any bytes; every read checks the checksum, and a mismatch is damage
 * named by the caller (a refusal for metadata, a warning for a verdict), never a value used.
 */
import { xxh64 } from '../record/checksum.js'

const magicBytes = 8
const headerBytes = magicBytes + 8
const sealedFormat = 0x02
const firstByte = 0xc1

export type SealedKind = 'meta' | 'verdict' | 'catalog'
const kindLetters: Record<SealedKind, string> = { meta: 'META', verdict: 'VRDT', catalog: 'CTLG' }
const kindNames: Record<SealedKind, string> = { meta: "a run's metadata", verdict: 'a verdict', catalog: "the listener's catalog of runs" }

function magicOf(kind: SealedKind): Buffer {
  return Buffer.concat([Buffer.from([firstByte]), Buffer.from(`PC${kindLetters[kind]}`, 'latin1'), Buffer.from([sealedFormat])])
}

/** The bytes of a sealed file holding body. */
export function seal(kind: SealedKind, body: Buffer): Buffer {
  const header = Buffer.alloc(headerBytes)
  magicOf(kind).copy(header, 0)
  header.writeBigUInt64LE(xxh64(body), magicBytes)
  return Buffer.concat([header, body])
}

export type Unsealed =
  | { readonly kind: 'sealed'; readonly body: Buffer }
  /** Written before files were sealed: the whole file is the body, and nothing vouches for it. */
  | { readonly kind: 'legacy'; readonly body: Buffer }
  | { readonly kind: 'damaged'; readonly problem: string }

/** The body of a file read back, checked against its checksum; which kind of file it must be is the caller's. */
export function unseal(kind: SealedKind, bytes: Buffer): Unsealed {
  if (bytes.length === 0 || bytes[0] !== firstByte) return { kind: 'legacy', body: bytes }
  if (bytes.length < headerBytes) return { kind: 'damaged', problem: `its ${bytes.length} bytes are shorter than its header` }
  const magic = bytes.subarray(0, magicBytes)
  if (!magic.equals(magicOf(kind))) {
    const other = (Object.keys(kindLetters) as SealedKind[]).find((k) => magic.equals(magicOf(k)))
    return {
      kind: 'damaged',
      problem: other === undefined ? 'its header is not a plugcheck file header' : `it holds ${kindNames[other]}, not ${kindNames[kind]}`,
    }
  }
  const body = bytes.subarray(headerBytes)
  if (xxh64(body) !== bytes.readBigUInt64LE(magicBytes)) return { kind: 'damaged', problem: 'it does not match its checksum' }
  return { kind: 'sealed', body }
}
