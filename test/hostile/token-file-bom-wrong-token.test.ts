/**
 * --token-file holding the right token as Windows tools save text: UTF-8 with a byte order mark
 * (PowerShell's Set-Content -Encoding UTF8, Notepad's "UTF-8 with BOM"), or UTF-16LE with one
 * (Windows PowerShell's `"T" | Out-File`), each with CRLF. The token is sent with the mark (or as
 * UTF-16 decoded as UTF-8) and the listener refuses it as a wrong token, with the hint "pass the
 * listener's --token with --token" although the token came from a file the operator believes right.
 *
 * Must: a UTF-8 byte order mark is not part of the token (the listener takes it, exit 0); a file that
 * is not UTF-8 text (UTF-16) is refused before the listener is asked (exit 2), naming the token file.
 * Never the listener's "wrong or missing token" for a file that holds the right token.
 */
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, startListener, tempDir } from '../fixtures/cli.js'

t.test('a token file with a byte order mark', async (t) => {
  const dir = tempDir(t)
  const listener = await startListener(join(dir, 'acks'), ['--token', 'secret-token'])
  t.teardown(() => listener.kill())

  const plain = join(dir, 'plain.token')
  writeFileSync(plain, 'secret-token\r\n')
  const control = await runCli(['runs', '--server', listener.server, '--token-file', plain])
  t.equal(control.code, 0, 'the same token without a mark is taken')

  const utf8Bom = join(dir, 'utf8-bom.token')
  writeFileSync(utf8Bom, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('secret-token\r\n')]))
  const bom = await runCli(['runs', '--server', listener.server, '--token-file', utf8Bom])
  t.equal(bom.code, 0, `UTF-8 with a byte order mark: the token is taken (${bom.stderr.trim()})`)
  t.notMatch(bom.stderr, /wrong or missing token/)

  const utf16 = join(dir, 'utf16.token')
  writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('secret-token\r\n', 'utf16le')]))
  const wide = await runCli(['runs', '--server', listener.server, '--token-file', utf16])
  t.equal(wide.code, 2)
  t.notMatch(wide.stderr, /wrong or missing token/, 'refused before the listener is asked')
  t.match(wide.stderr, utf16, 'the message names the token file')
})
