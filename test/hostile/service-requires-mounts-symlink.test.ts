/**
 * agent --print-service systemd --file /data/test/f where /data is a symlink to the mount point
 * (/data -> /mnt/ssd, a common layout). RequiresMountsFor= gets /data/test as given; systemd adds the
 * mount units of that path's prefixes as they are spelled (/data, /data/test), following no symlink,
 * so the mount of /mnt/ssd is never required: at a boot where it did not mount, the agent starts and
 * writes into the empty mount point /mnt/ssd/test, which README says RequiresMountsFor= prevents.
 * (systemd/systemd#8907: RequiresMountsFor= takes no symlink into account.)
 * Must: RequiresMountsFor= names the directory where the data file really is (its real path), so the
 * file system that holds it is the one required.
 */
import t from 'tap'
import { mkdirSync, realpathSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, tempDir } from '../fixtures/cli.js'

t.test('RequiresMountsFor= through a symlinked directory', async (t) => {
  const dir = tempDir(t)
  const mountPoint = join(dir, 'mnt-ssd')
  mkdirSync(join(mountPoint, 'test'), { recursive: true })
  const data = join(dir, 'data')
  symlinkSync(mountPoint, data)
  const r = await runCli(['agent', '--print-service', 'systemd', '--server', '127.0.0.1:7', '--file', join(data, 'test', 'f.dat')])
  t.equal(r.code, 0, r.stderr)
  const line = r.stdout.split('\n').find((l) => l.startsWith('RequiresMountsFor='))
  t.ok(line, 'a RequiresMountsFor= line')
  const words = (line ?? '').slice('RequiresMountsFor='.length).split(' ')
  t.ok(words.includes(realpathSync(join(mountPoint, 'test'))), `the real directory is required (${line})`)
})
