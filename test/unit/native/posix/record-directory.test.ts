/**
 * A files run's directory on this POSIX system: the table of directory syncs (methods.ts
 * directorySyncs) over every method and family, then every method Linux has, run under strace, to see
 * that the calls the table names are the calls made, on the record file and on the directory.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { directorySyncs, methodNames, type DirectorySyncCall, type MethodName } from '../../../../src/native/methods.js'
import { methodRow } from '../../../../src/native/registry.js'
import { nativePort } from '../../../../src/native/index.js'

/** What each method's directory sync must be on a POSIX system: the kind of sync the method makes of the file. */
const posixExpected: Record<MethodName, DirectorySyncCall> = {
  fsync: 'fsync',
  fdatasync: 'fdatasync',
  open_sync: 'fsync',
  open_datasync: 'fdatasync',
  fsync_writethrough: 'fullfsync',
  barrier_fsync: 'barrier',
  flush_data_only: 'fdatasync',
  pwritev2_dsync: 'fsync',
  none: 'none',
}

t.test('every method has its directory sync in each family; Windows can flush none', async (t) => {
  for (const method of methodNames) {
    t.equal(directorySyncs.posix[method], posixExpected[method], `posix ${method}`)
    t.equal(directorySyncs.windows[method], method === 'none' ? 'none' : 'cannot', `windows ${method}`)
  }
  t.same(Object.keys(directorySyncs.posix).sort(), [...methodNames].sort())
  t.same(Object.keys(directorySyncs.windows).sort(), [...methodNames].sort())
})

/** The system call strace shows on a directory for each directory sync (Linux has no F_FULLFSYNC or barrier). */
const straced: Partial<Record<DirectorySyncCall, string | null>> = { fsync: 'fsync', fdatasync: 'fdatasync', none: null }
/** The call each method makes on the record file itself, where the method syncs after its writes. */
const fileSync: Partial<Record<MethodName, string | null>> = {
  fsync: 'fsync',
  fdatasync: 'fdatasync',
  open_sync: null,
  open_datasync: null,
  pwritev2_dsync: null,
  none: null,
}

const hasStrace = ((): boolean => {
  try {
    execFileSync('strace', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

for (const publish of ['rename', 'link'] as const) {
  t.test(`every method Linux has makes, syncs and publishes (${publish}) a record file with the calls its row names`, async (t) => {
    if (process.platform !== 'linux') {
      t.pass('strace and these calls are Linux facts')
      return
    }
    t.ok(hasStrace, 'strace is installed (CONTRIBUTING.md: the test machines have it)')
    const methods = methodNames.filter((m) => methodRow(m).available)
    t.same(methods, ['fsync', 'fdatasync', 'open_sync', 'open_datasync', 'pwritev2_dsync', 'none'])
    const dir = mkdtempSync(join(tmpdir(), 'plugcheck-recdir-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    for (const m of methods) mkdirSync(join(dir, m))
    const log = join(dir, 'strace.log')
    const out = execFileSync(
      'strace',
      [
        '-f',
        '-y',
        '-o',
        log,
        '-e',
        'trace=openat,fsync,fdatasync,renameat,renameat2,linkat,unlinkat,pwrite64,pwritev2',
        process.execPath,
        '--import',
        'tsx',
        'test/fixtures/record-directory-child.ts',
        dir,
        publish,
        ...methods,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    )
    t.equal(out, 'done\n')
    const lines = readFileSync(log, 'utf8').split('\n')
    for (const method of methods) {
      const sub = join(dir, method)
      t.same(readdirSync(sub), ['rec-1'], `${method}: only the published name is left`)
      t.same(readFileSync(join(sub, 'rec-1')), Buffer.alloc(4096, method.length), `${method}: the record's bytes`)
      const onDirectory = (call: string): boolean => lines.some((l) => new RegExp(`\\b${call}\\(\\d+<${sub}>\\)`).test(l))
      const onRecord = (call: string): boolean => lines.some((l) => new RegExp(`\\b${call}\\(\\d+<${sub}/\\.rec-1\\.tmp>`).test(l))
      const dirCall = straced[directorySyncs.posix[method]]
      t.not(dirCall, undefined, `${method}: its directory sync is one Linux makes`)
      for (const call of ['fsync', 'fdatasync']) t.equal(onDirectory(call), call === dirCall, `${method}: ${call} on the directory`)
      for (const call of ['fsync', 'fdatasync']) t.equal(onRecord(call), call === fileSync[method], `${method}: ${call} on the record file`)
      const created = lines.find((l) => l.includes(`"${'.rec-1.tmp'}"`) && /openat\(\d+</.test(l) && l.includes(`<${sub}>`))
      t.match(created ?? '', /O_CREAT\|O_EXCL|O_EXCL\|O_CREAT|O_CREAT.*O_EXCL/, `${method}: created with O_EXCL`)
      if (method === 'open_sync') t.match(created ?? '', /O_SYNC/, 'open_sync: O_SYNC')
      if (method === 'open_datasync') t.match(created ?? '', /O_DSYNC/, 'open_datasync: O_DSYNC')
      if (method === 'pwritev2_dsync')
        t.ok(
          lines.some((l) => l.includes(`pwritev2(`) && l.includes(`${sub}/.rec-1.tmp`) && l.includes('RWF_DSYNC')),
          'pwritev2_dsync: RWF_DSYNC',
        )
      const published =
        publish === 'rename'
          ? lines.some((l) => /renameat2?\(/.test(l) && l.includes(`<${sub}>`) && l.includes('"rec-1"'))
          : lines.some((l) => l.includes('linkat(') && l.includes('"rec-1"') && l.includes(`<${sub}>`)) &&
            lines.some((l) => l.includes('unlinkat(') && l.includes('".rec-1.tmp"') && l.includes(`<${sub}>`))
      t.ok(published, `${method}: published by ${publish} relative to the directory`)
    }
  })
}

t.test('--direct: each record file is opened with O_DIRECT (or refused with EINVAL where the file system has no direct I/O)', async (t) => {
  if (process.platform !== 'linux') {
    t.pass('O_DIRECT as strace shows it is a Linux fact')
    return
  }
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-recdir-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'fdatasync'))
  if (nativePort().fileSystemOf(dir)?.inMemory === true) {
    const directory = nativePort().openRecordDirectory(join(dir, 'fdatasync'), 'fdatasync', { direct: true })
    t.throws(() => directory.create('.rec-1.tmp'), { code: 'EINVAL' }, 'a memory file system refuses O_DIRECT')
    directory.close()
    return
  }
  const log = join(dir, 'strace.log')
  const args = ['-f', '-y', '-o', log, '-e', 'trace=openat', process.execPath, '--import', 'tsx', 'test/fixtures/record-directory-child.ts']
  t.equal(execFileSync('strace', [...args, dir, 'rename-direct', 'fdatasync'], { encoding: 'utf8', timeout: 60_000 }), 'done\n')
  const created = readFileSync(log, 'utf8')
    .split('\n')
    .find((l) => l.includes('".rec-1.tmp"') && l.includes(`<${join(dir, 'fdatasync')}>`))
  t.match(created ?? '', /O_DIRECT/)
  t.same(readFileSync(join(dir, 'fdatasync', 'rec-1')), Buffer.alloc(4096, 'fdatasync'.length))
})

t.test('a record file that exists already is refused (O_EXCL), and nothing is replaced', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plugcheck-recdir-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const directory = nativePort().openRecordDirectory(dir, 'fdatasync', { direct: false })
  t.teardown(() => directory.close())
  const file = directory.create('.rec-1.tmp')
  file.write(Buffer.alloc(512, 7), 0)
  file.close()
  t.throws(() => directory.create('.rec-1.tmp'), { code: 'EEXIST', syscall: 'openat' })
  t.same(readFileSync(join(dir, '.rec-1.tmp')), Buffer.alloc(512, 7))
  t.throws(() => directory.unlink('rec-9'), { code: 'ENOENT', syscall: 'unlinkat' })
  t.throws(() => directory.link('.rec-1.tmp', '.rec-1.tmp'), { code: 'EEXIST', syscall: 'linkat' })
  directory.rename('.rec-1.tmp', 'rec-1')
  t.notOk(existsSync(join(dir, '.rec-1.tmp')))
  t.same(readFileSync(join(dir, 'rec-1')), Buffer.alloc(512, 7))
})
