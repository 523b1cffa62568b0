/** Win32's special file names, refused before plugcheck creates a file (pure: runs on any system). */
import t from 'tap'
import { unsafeWindowsFileName } from '../../src/native/windows/names.js'

t.test('reserved device names, with or without an extension, in any case', async (t) => {
  for (const name of [
    'NUL',
    'nul',
    'CON',
    'prn',
    'AUX',
    'COM1',
    'com9',
    'COM0',
    'LPT1',
    'lpt1.dat',
    'NUL.fsync',
    'nul.txt',
    'COM\u00b9',
    'CONIN$',
    'conout$.log',
    'NUL .txt',
  ]) {
    t.match(unsafeWindowsFileName(`C:\\data\\${name}`), /reserved device name/, name)
  }
})

t.test('a trailing dot or space', async (t) => {
  for (const name of ['report.', 'report ', 'a..', 'x. '])
    t.match(unsafeWindowsFileName(`Z:\\tmp\\${name}`), /ends in a dot or a space/, JSON.stringify(name))
})

t.test('ordinary names pass, including ones that only look alike', async (t) => {
  for (const name of [
    'data',
    'data.fsync',
    'NULL',
    'CONSOLE',
    'COM10',
    'LPT',
    'nul_data',
    'my con.txt',
    '.data.plugcheck-0123456789abcdef.tmp',
    'données',
    'a b',
  ]) {
    t.equal(unsafeWindowsFileName(`C:\\x\\${name}`), null, name)
  }
  t.equal(unsafeWindowsFileName('C:\\'), null, 'a root')
})
