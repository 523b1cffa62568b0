/**
 * A record's bytes are a format: a data file written by one version of plugcheck must verify with
 * any later one. These hashes of whole records were taken from the first implementation of the fill
 * (one pool window per sector); any faster fill must reproduce them byte for byte, for records of
 * one sector, of one and of one and a half fill chunks, and large ones, with seqs past 32 bits.
 */
import t from 'tap'
import { fillRecord, runKey } from '../../../src/record/records.js'
import { xxh64 } from '../../../src/record/checksum.js'

const golden: readonly [recordSizeBytes: number, seq: number, hash: bigint][] = [
  [512, 1, 0x5dff0398546de028n],
  [512, 2, 0xd32733626e4e838cn],
  [512, 4294967301, 0xe82670667007342n],
  [512, 1099511627779, 0x9b78cdf7cbf2da20n],
  [8192, 1, 0x35e6dd3c2b410070n],
  [8192, 2, 0x89dcbbdae17eddbn],
  [8192, 4294967301, 0xc85f5cef6316985en],
  [8192, 1099511627779, 0x407f565d463122e2n],
  [12288, 1, 0x77490657060f0977n],
  [12288, 2, 0x7974d1582201cd97n],
  [12288, 4294967301, 0x6c4babeff53d61b6n],
  [12288, 1099511627779, 0xe238ba154f96c8cdn],
  [65536, 1, 0xedbaccb61df73656n],
  [65536, 2, 0x2657ffa4ad5eb22n],
  [65536, 4294967301, 0xa727c5328de8bc12n],
  [65536, 1099511627779, 0x51328a9176b5635bn],
]

t.test('records are byte for byte what the format has always written', async (t) => {
  const key = runKey('5ca1ab1e0ddba115')
  for (const [size, seq, hash] of golden) {
    const record = Buffer.alloc(size)
    fillRecord(record, key, seq, seq % 1000, 1_700_000_000_000_000 + seq)
    t.equal(xxh64(record), hash, `${size}-byte record, seq ${seq}`)
  }
})

t.test('one buffer refilled with other seqs and sizes of the same run gives the same bytes as a fresh one', async (t) => {
  const key = runKey('5ca1ab1e0ddba115')
  const reused = Buffer.alloc(12288)
  for (const [size, seq, hash] of [...golden].reverse()) {
    if (size > reused.length) continue
    const view = reused.subarray(0, size)
    fillRecord(view, key, seq, seq % 1000, 1_700_000_000_000_000 + seq)
    t.equal(xxh64(view), hash, `${size}-byte record, seq ${seq}, in a reused buffer`)
  }
})
