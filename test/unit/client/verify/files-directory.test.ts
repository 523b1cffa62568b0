/**
 * A files run's place and listing (files-directory.ts): what lies at the path, each kind its answer or
 * a clear exit 3; every name of a directory listed once; a directory past the bound refused; the
 * packed list growing past its first block and sorting by value.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { listDirectory, lstatOrNull, PackedList, runPlace } from '../../../../src/client/verify/files-directory.js'
import { PlugcheckError } from '../../../../src/base/errors.js'

t.test('runPlace: a directory, nothing, a file; a symbolic link or a FIFO is exit 3, never followed', async (t) => {
  const dir = t.testdir({ run: {}, file: 'the user put a file here' })
  t.equal(runPlace(join(dir, 'run')), 'directory')
  t.equal(runPlace(join(dir, 'missing')), 'missing')
  t.equal(runPlace(join(dir, 'file')), 'file')
  symlinkSync(join(dir, 'run'), join(dir, 'linked'))
  t.throws(() => runPlace(join(dir, 'linked')), {
    constructor: PlugcheckError,
    exitCode: 3,
    message: /linked is a symbolic link, not the directory write made/,
  })
  execFileSync('mkfifo', [join(dir, 'fifo')])
  t.throws(() => runPlace(join(dir, 'fifo')), { constructor: PlugcheckError, exitCode: 3, message: /fifo is a FIFO, not a directory/ })
})

t.test('lstatOrNull: the entry itself, never its target; null when nothing is there', async (t) => {
  const dir = t.testdir({ file: 'x' })
  symlinkSync(join(dir, 'file'), join(dir, 'link'))
  t.equal(lstatOrNull(join(dir, 'file'))?.isFile(), true)
  t.equal(lstatOrNull(join(dir, 'link'))?.isSymbolicLink(), true)
  t.equal(lstatOrNull(join(dir, 'missing')), null)
})

t.test('listDirectory: every name once, the listing complete (null)', async (t) => {
  const dir = t.testdir()
  const made = Array.from({ length: 2500 }, (_, i) => `rec-${i + 1}`)
  for (const name of made) writeFileSync(join(dir, name), '')
  mkdirSync(join(dir, 'sub'))
  const names: string[] = []
  t.equal(
    listDirectory(dir, (name) => names.push(name), 10_000),
    null,
  )
  t.same(names.sort(), [...made, 'sub'].sort())
})

t.test('listDirectory: past maxEntries, exit 3 naming the bound, after listing no more than it', async (t) => {
  const dir = t.testdir()
  for (let i = 0; i < 20; i++) writeFileSync(join(dir, `rec-${i + 1}`), '')
  let listed = 0
  t.throws(
    () =>
      listDirectory(
        dir,
        () => {
          listed++
        },
        5,
      ),
    { constructor: PlugcheckError, exitCode: 3, message: /holds more than 5 entries, more than a files run makes.*nothing was judged/ },
  )
  t.equal(listed, 5)
})

t.test('listDirectory: a path that is no directory is exit 3', async (t) => {
  const dir = t.testdir({ file: 'x' })
  t.throws(() => listDirectory(join(dir, 'file'), () => {}, 10), { constructor: PlugcheckError, exitCode: 3, message: /could not list/ })
})

t.test('PackedList: grows past its first 1,024 values, sorted by value (not as text)', async (t) => {
  const list = new PackedList()
  const values = Array.from({ length: 3000 }, (_, i) => ((i * 7919) % 3000) * 256 + 3)
  for (const value of values) list.push(value)
  t.equal(list.length, 3000)
  const sorted = list.sorted()
  t.equal(sorted.length, 3000)
  t.same(
    Array.from(sorted),
    [...values].sort((a, b) => a - b),
  )
})
