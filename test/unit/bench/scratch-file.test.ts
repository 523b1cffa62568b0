/**
 * The metadata section's directory beside bench's scratch file: made, emptied of bench's names only,
 * refused (exit 2, touched nothing) when it holds another name, and removed with the file only when
 * this run made or emptied it.
 */
import t from 'tap'
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../../fixtures/cli.js'
import { createScratchFile, prepareFilesDirectory, removeScratchFile } from '../../../src/bench/scratch-file.js'
import { PlugcheckError } from '../../../src/base/errors.js'

t.test('made by the first metadata row, removed with the scratch file', async (t) => {
  const dir = tempDir(t)
  const scratch = createScratchFile(dir)
  t.equal(scratch.filesDirectory, `${scratch.path}.files`)
  prepareFilesDirectory(scratch)
  writeFileSync(join(scratch.filesDirectory, 'rec-3'), 'x')
  writeFileSync(join(scratch.filesDirectory, '.rec-4.tmp'), 'x')
  prepareFilesDirectory(scratch)
  t.same(readdirSync(scratch.filesDirectory), [], 'the next row starts from an empty directory')
  writeFileSync(join(scratch.filesDirectory, 'rec-5'), 'x')
  removeScratchFile(scratch)
  t.same(readdirSync(dir), [], 'file and directory removed')
})

t.test('a leftover directory holding a name bench does not make is refused and left as it is', async (t) => {
  const dir = tempDir(t)
  const scratch = createScratchFile(dir)
  mkdirSync(scratch.filesDirectory)
  writeFileSync(join(scratch.filesDirectory, 'rec-1'), 'one')
  writeFileSync(join(scratch.filesDirectory, 'mine.txt'), 'precious')
  t.throws(() => prepareFilesDirectory(scratch), {
    constructor: PlugcheckError,
    exitCode: 2,
    message: /holds "mine\.txt", which plugcheck bench did not make/,
  })
  removeScratchFile(scratch)
  t.notOk(existsSync(scratch.path), 'the scratch file removed')
  t.same(readdirSync(scratch.filesDirectory).sort(), ['mine.txt', 'rec-1'], 'the directory untouched')
  t.equal(readFileSync(join(scratch.filesDirectory, 'mine.txt'), 'utf8'), 'precious')
})
