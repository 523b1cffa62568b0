/**
 * describeSystemError names the errno of a failed call in one line. Node has no name for some Linux
 * errnos a damaged file system returns (EBADMSG from ext4's failed checksums, EUCLEAN): its error then
 * says "Unknown system error -74", which must read as the errno's name. The errors are built as Node
 * builds them for a failed fs call (code, errno, syscall, message).
 */
import { openSync } from 'node:fs'
import t from 'tap'
import { describeSystemError, systemErrorCode } from '../../../src/base/errors.js'

function nodeError(errno: number, code: string, text: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${text}, open '/mnt/test/plugcheck.dat'`), { errno: -errno, code, syscall: 'open' })
}

t.test('an errno Node names keeps its code and text', async (t) => {
  let error: unknown
  try {
    openSync('/nonexistent-plugcheck-dir/x', 'r')
  } catch (e) {
    error = e
  }
  t.equal(describeSystemError(error), 'ENOENT (no such file or directory)')
  t.equal(systemErrorCode(error), 'ENOENT')
  t.equal(describeSystemError(nodeError(5, 'EIO', 'i/o error')), 'EIO (i/o error)')
})

t.test('EBADMSG and EUCLEAN, which Node calls unknown, are named', async (t) => {
  const badMessage = nodeError(74, 'Unknown system error -74', 'Unknown system error -74')
  t.equal(describeSystemError(badMessage), 'EBADMSG (bad message: a checksum failed)')
  t.equal(systemErrorCode(badMessage), 'EBADMSG')
  t.notMatch(describeSystemError(badMessage), /unknown system error/i)
  const unclean = nodeError(117, 'Unknown system error -117', 'Unknown system error -117')
  t.equal(describeSystemError(unclean), 'EUCLEAN (structure needs cleaning: the file system is corrupted)')
})

t.test('an errno no table names is said by number', async (t) => {
  const odd = nodeError(250, 'Unknown system error -250', 'Unknown system error -250')
  t.equal(systemErrorCode(odd), 'errno 250')
  t.equal(describeSystemError(odd), 'errno 250 (unknown system error -250)')
})

t.test('an error without a code is its message', async (t) => {
  t.equal(describeSystemError(new Error('plain')), 'plain')
  t.equal(systemErrorCode(new Error('plain')), undefined)
})
