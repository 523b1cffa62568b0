/**
 * The method tables of Linux, macOS, FreeBSD and OpenBSD, for both answers of the run-time probe
 * (does libc export fdatasync?). Pure: posixTable loads no library, so every system's table is
 * checked here on any system.
 */
import t from 'tap'
import { methodNames, type MethodName } from '../../../src/native/methods.js'
import type { MethodRow, PlatformTable } from '../../../src/native/port.js'
import type { PosixOs } from '../../../src/native/posix/constants.js'
import { posixTable } from '../../../src/native/posix/table.js'

const systems: readonly PosixOs[] = ['linux', 'darwin', 'freebsd', 'openbsd']
const names: Record<PosixOs, string> = { linux: 'Linux', darwin: 'macOS', freebsd: 'FreeBSD', openbsd: 'OpenBSD' }
const probes = [{ fdatasync: true }, { fdatasync: false }] as const

const row = (table: PlatformTable, name: MethodName): MethodRow => {
  const found = table.methods.find((m) => m.name === name)
  if (found === undefined) throw new Error(`no ${name} row`)
  return found
}

/** Which methods each system has (with fdatasync exported), and the call or flag each unavailable one lacks. */
const availability: Record<PosixOs, Partial<Record<MethodName, true | RegExp>>> = {
  linux: {
    fsync: true,
    fdatasync: true,
    open_sync: true,
    open_datasync: true,
    fsync_writethrough: /F_FULLFSYNC|FlushFileBuffers/,
    barrier_fsync: /F_BARRIERFSYNC/,
    flush_data_only: /NtFlushBuffersFileEx/,
    pwritev2_dsync: true,
    none: true,
  },
  darwin: {
    fsync: true,
    fdatasync: true,
    open_sync: true,
    open_datasync: true,
    fsync_writethrough: true,
    barrier_fsync: true,
    flush_data_only: /NtFlushBuffersFileEx/,
    pwritev2_dsync: /pwritev2/,
    none: true,
  },
  freebsd: {
    fsync: true,
    fdatasync: true,
    open_sync: true,
    open_datasync: true,
    fsync_writethrough: /F_FULLFSYNC|FlushFileBuffers/,
    barrier_fsync: /F_BARRIERFSYNC/,
    flush_data_only: /NtFlushBuffersFileEx/,
    pwritev2_dsync: /pwritev2/,
    none: true,
  },
  openbsd: {
    fsync: true,
    fdatasync: true,
    open_sync: true,
    open_datasync: true,
    fsync_writethrough: /F_FULLFSYNC|FlushFileBuffers/,
    barrier_fsync: /F_BARRIERFSYNC/,
    flush_data_only: /NtFlushBuffersFileEx/,
    pwritev2_dsync: /pwritev2/,
    none: true,
  },
}

t.test('every method has exactly one row, in the order of methods.ts', async (t) => {
  for (const os of systems) {
    for (const probe of probes) {
      const table = posixTable(os, probe)
      t.same(
        table.methods.map((m) => m.name),
        [...methodNames],
        `${os}, fdatasync ${probe.fdatasync ? 'exported' : 'missing'}`,
      )
      t.equal(table.platform, os)
      t.equal(table.name, names[os])
      t.equal(table.family, 'posix')
    }
  }
})

t.test('available rows say their calls; unavailable ones say which call or flag is missing, and where', async (t) => {
  for (const os of systems) {
    for (const probe of probes) {
      const table = posixTable(os, probe)
      for (const name of methodNames) {
        const r = row(table, name)
        const label = `${os} ${name} (fdatasync ${probe.fdatasync ? 'exported' : 'missing'})`
        t.ok(r.calls.length > 0, `${label}: calls`)
        const wanted = name === 'fdatasync' && !probe.fdatasync ? /fdatasync/ : availability[os][name]
        if (wanted === true) {
          t.equal(r.available, true, `${label}: available`)
          t.equal(r.reason, undefined, `${label}: no reason`)
        } else {
          t.equal(r.available, false, `${label}: unavailable`)
          t.match(r.reason, wanted!, `${label}: reason names the call or flag`)
          t.match(r.reason, names[os], `${label}: reason names the system`)
        }
      }
    }
  }
})

t.test('the calls each method makes', async (t) => {
  for (const os of systems) {
    const table = posixTable(os, { fdatasync: true })
    t.match(row(table, 'fsync').calls, /^pwrite, fsync$/)
    t.match(row(table, 'fdatasync').calls, /^pwrite, fdatasync$/)
    t.match(row(table, 'open_sync').calls, /O_SYNC/)
    t.match(row(table, 'open_datasync').calls, /O_DSYNC/)
    t.match(row(table, 'none').calls, /^pwrite$/)
  }
  const mac = posixTable('darwin', { fdatasync: true })
  t.match(row(mac, 'fsync_writethrough').calls, /fcntl\(F_FULLFSYNC\)/)
  t.match(row(mac, 'barrier_fsync').calls, /fcntl\(F_BARRIERFSYNC\)/)
  t.match(row(posixTable('linux', { fdatasync: true }), 'pwritev2_dsync').calls, /pwritev2\(RWF_DSYNC\)/)
})

t.test('a missing fdatasync is n/a with the reason, and says since when the system has it', async (t) => {
  for (const os of systems) {
    const r = row(posixTable(os, { fdatasync: false }), 'fdatasync')
    t.equal(r.available, false)
    t.match(r.reason, new RegExp(`this ${names[os]} C library does not export fdatasync`))
  }
  t.match(row(posixTable('freebsd', { fdatasync: false }), 'fdatasync').reason, /11\.1/)
  t.match(row(posixTable('openbsd', { fdatasync: false }), 'fdatasync').reason, /5\.4/)
})

t.test('macOS: fsync, fdatasync and the open_* methods carry the drive-cache caveat', async (t) => {
  const mac = posixTable('darwin', { fdatasync: true })
  for (const name of ['fsync', 'fdatasync', 'open_sync', 'open_datasync'] as const) {
    const r = row(mac, name)
    t.equal(r.durable, true, `${name} asks for durability`)
    t.match(r.caveat, /does not ask the drive to flush its cache/, `${name}: drive cache`)
    t.match(r.caveat, /fsync_writethrough/, `${name}: names the method that flushes it`)
  }
  t.match(row(mac, 'open_datasync').caveat, /O_DSYNC as O_SYNC/)
  const full = row(mac, 'fsync_writethrough')
  t.equal(full.available, true)
  t.equal(full.durable, true)
  t.equal(full.caveat, undefined, 'F_FULLFSYNC is the full flush: no caveat')
  // Elsewhere fsync asks the device to flush: no caveat there.
  for (const os of ['linux', 'freebsd', 'openbsd'] as const)
    t.equal(row(posixTable(os, { fdatasync: true }), 'fsync').caveat, undefined, `${os} fsync`)
})

t.test('macOS barrier_fsync is not durable and promises order only', async (t) => {
  const r = row(posixTable('darwin', { fdatasync: true }), 'barrier_fsync')
  t.equal(r.available, true)
  t.equal(r.durable, false)
  t.match(r.caveat, /ordering barrier, not a flush/)
  t.match(r.caveat, /prefix in write order/)
})

t.test('OpenBSD open_datasync is open_sync, and its fdatasync is fsync', async (t) => {
  const table = posixTable('openbsd', { fdatasync: true })
  const r = row(table, 'open_datasync')
  t.equal(r.available, true)
  t.match(r.caveat, /O_DSYNC as O_SYNC/)
  t.match(r.caveat, /open_sync/)
  t.match(row(table, 'fdatasync').caveat, /fsync/)
})

t.test('none is the never-synced control everywhere', async (t) => {
  for (const os of systems) {
    const r = row(posixTable(os, { fdatasync: true }), 'none')
    t.equal(r.available, true)
    t.equal(r.durable, false)
    t.match(r.caveat, /never synced/)
  }
})

t.test('--direct: O_DIRECT on Linux and FreeBSD, F_NOCACHE on macOS, n/a with the reason on OpenBSD', async (t) => {
  for (const probe of probes) {
    for (const os of ['linux', 'freebsd'] as const) {
      const d = posixTable(os, probe).direct
      t.equal(d.applies, true, `${os} direct applies`)
      if (d.applies) t.match(d.how, /O_DIRECT/)
    }
    const mac = posixTable('darwin', probe).direct
    t.equal(mac.applies, true)
    if (mac.applies) {
      t.match(mac.how, /F_NOCACHE/)
      t.notMatch(mac.how, /O_DIRECT/)
    }
    const obsd = posixTable('openbsd', probe).direct
    t.equal(obsd.applies, false)
    if (!obsd.applies) {
      t.match(obsd.reason, /OpenBSD/)
      t.match(obsd.reason, /O_DIRECT/)
    }
  }
})

t.test('the probe changes only the fdatasync row', async (t) => {
  for (const os of systems) {
    const yes = posixTable(os, { fdatasync: true })
    const no = posixTable(os, { fdatasync: false })
    for (const name of methodNames) if (name !== 'fdatasync') t.same(row(no, name), row(yes, name), `${os} ${name}`)
    t.same(no.direct, yes.direct)
  }
})
