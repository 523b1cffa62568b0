/** The environment fingerprint: mount table parsing, device numbers, sysfs walking, and the real thing. */
import t from 'tap'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { collectFingerprint, describeBlockDevice, findMount, parseMountInfo, splitDeviceNumber } from '../../../src/env/fingerprint.js'
import { fingerprintSchema } from '../../../src/env/fingerprint-schema.js'
import { nativePort } from '../../../src/native/index.js'

const mountinfo = [
  '26 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard',
  '29 24 0:26 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683620k',
  '40 26 8:2 / /mnt/my\\040disk rw,noatime shared:5 - xfs /dev/sda2 rw,attr2,inode64',
  '41 26 254:0 /srv /data rw - ext4 /dev/vda rw,discard',
  'garbage line',
].join('\n')

t.test('parseMountInfo reads proc(5) lines, unescaping octal and skipping optional fields', async (t) => {
  const entries = parseMountInfo(mountinfo)
  t.equal(entries.length, 4, 'the malformed line is skipped')
  t.same(entries[2], {
    major: 8,
    minor: 2,
    mountPoint: '/mnt/my disk',
    mountOptions: ['rw', 'noatime'],
    fsType: 'xfs',
    source: '/dev/sda2',
    superOptions: ['rw', 'attr2', 'inode64'],
  })
})

t.test('findMount picks the longest mount point of the right device that holds the path', async (t) => {
  const entries = parseMountInfo(mountinfo)
  t.equal(findMount(entries, 254, 0, '/data/x/file')?.mountPoint, '/data')
  t.equal(findMount(entries, 254, 0, '/database/file')?.mountPoint, '/', '/data is not a prefix of /database')
  t.equal(findMount(entries, 8, 2, '/mnt/my disk/f')?.fsType, 'xfs')
  t.equal(findMount(entries, 9, 9, '/x'), null)
})

t.test('splitDeviceNumber follows glibc', async (t) => {
  t.same(splitDeviceNumber(0xfe00n), { major: 254, minor: 0 })
  t.same(splitDeviceNumber(0x0803n), { major: 8, minor: 3 })
  // major 259 (NVMe partitions), minor 300: both spill into the high bits.
  const dev = ((259n & 0xfffn) << 8n) | (300n & 0xffn) | ((300n & ~0xffn) << 12n)
  t.same(splitDeviceNumber(dev), { major: 259, minor: 300 })
})

t.test('describeBlockDevice resolves a partition to its disk and follows stacked devices', async (t) => {
  const sys = fs.mkdtempSync(path.join(os.tmpdir(), 'plugcheck-fake-sys-'))
  t.teardown(() => fs.rmSync(sys, { recursive: true, force: true }))
  const write = (file: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(sys, file)), { recursive: true })
    fs.writeFileSync(path.join(sys, file), `${text}\n`)
  }
  // sda (a disk with partition sda2) under dm-0.
  write('devices/pci/block/sda/queue/write_cache', 'write back')
  write('devices/pci/block/sda/queue/fua', '1')
  write('devices/pci/block/sda/queue/rotational', '1')
  write('devices/pci/block/sda/queue/logical_block_size', '512')
  write('devices/pci/block/sda/queue/physical_block_size', '4096')
  write('devices/pci/block/sda/device/model', 'ST4000DM004  ')
  write('devices/pci/block/sda/device/rev', '0001')
  write('devices/pci/block/sda/sda2/partition', '2')
  write('devices/virtual/block/dm-0/queue/write_cache', 'write back')
  write('devices/virtual/block/dm-0/queue/rotational', '0')
  fs.mkdirSync(path.join(sys, 'devices/virtual/block/dm-0/slaves'))
  fs.symlinkSync('../../../../pci/block/sda/sda2', path.join(sys, 'devices/virtual/block/dm-0/slaves/sda2'))
  fs.mkdirSync(path.join(sys, 'dev/block'), { recursive: true })
  fs.symlinkSync('../../devices/pci/block/sda/sda2', path.join(sys, 'dev/block/8:2'))
  fs.symlinkSync('../../devices/virtual/block/dm-0', path.join(sys, 'dev/block/253:0'))

  const partition = describeBlockDevice(8, 2, sys)
  t.same(partition, {
    name: 'sda',
    partition: 'sda2',
    model: 'ST4000DM004',
    vendor: null,
    firmware: '0001',
    driver: null,
    writeCache: 'write back',
    fua: true,
    rotational: true,
    logicalBlockBytes: 512,
    physicalBlockBytes: 4096,
    underlying: [],
  })
  const dm = describeBlockDevice(253, 0, sys)
  t.equal(dm?.name, 'dm-0')
  t.equal(dm?.rotational, false)
  t.equal(dm?.fua, null, 'missing files are null, not guesses')
  t.same(
    dm?.underlying.map((d) => [d.name, d.partition, d.rotational]),
    [['sda', 'sda2', true]],
  )
  t.equal(describeBlockDevice(1, 99, sys), null)
})

function fingerprintOf(dir: string) {
  const file = path.join(fs.mkdtempSync(path.join(dir, 'plugcheck-fp-')), 'f')
  fs.writeFileSync(file, '')
  try {
    return collectFingerprint(file, nativePort().fileSystemOf(file))
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true })
  }
}

t.test('the real thing: tmpfs at /dev/shm', async (t) => {
  const fp = fingerprintSchema.parse(fingerprintOf('/dev/shm'))
  t.equal(fp.target.fileSystem.type, 'tmpfs')
  t.equal(fp.target.inMemory, true)
  t.equal(fp.device, null)
  t.equal(fp.os.platform, 'linux')
  t.match(fp.bootId ?? '', /^[0-9a-f-]{36}$/)
})

t.test('the real thing: the disk under the temp directory', async (t) => {
  const fp = fingerprintSchema.parse(fingerprintOf(os.tmpdir()))
  t.equal(fp.target.inMemory, fp.target.fileSystem.type === 'tmpfs')
  if (fp.device === null) {
    t.comment(`no block device behind ${os.tmpdir()} (${fp.target.fileSystem.type})`)
    return
  }
  t.match(fp.device.writeCache ?? 'write back', /^write (back|through)$/)
  t.ok(fp.device.logicalBlockBytes === null || fp.device.logicalBlockBytes >= 512)
  t.not(fp.target.fileSystem.mountPoint, null)
})
