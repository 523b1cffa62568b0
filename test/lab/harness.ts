/**
 * Power-cut lab: a real ext4 on a disk whose power we can cut.
 *
 *   disk.img <- nbdkit file plugin <- [cache filter] <- unix socket <- nbdfuse (a file on FUSE)
 *            <- loop device <- ext4 at mountPoint <- the writer under test
 *
 * Fault model: the cut kills the writer, nbdkit and nbdfuse at the same moment, so whatever
 * the disk held only in its volatile cache is gone, and nothing the kernel still had queued
 * can reach the image afterwards. The reboot serves the same image without any cache and
 * mounts it again, which replays the ext4 journal.
 *   honest    = cache=writeback: a volatile write cache, written to the image on every flush
 *   lying     = cache=unsafe: flushes are acknowledged and ignored, nothing reaches the image
 *   writethru = no cache filter: every write reaches the image at once
 *   subtle    = cache=writeback with a small cache-max-size: on every flush the cache writes its
 *               dirty blocks to the image, but when it runs full it reclaims blocks to make room
 *               without writing the dirty ones back first (nbdkit 1.32). A few percent of the
 *               blocks a flush later acknowledges never reach the image: a drive with a small
 *               volatile cache and a buggy flush. (See subtleCacheArgs for what was measured.)
 *
 * Assumptions: Linux, root, /dev/fuse, and the Debian packages nbdkit, libnbd-bin (nbdfuse),
 * e2fsprogs (mkfs.ext4) and mount (losetup, umount). nbdfuse sends one NBD FLUSH per
 * fsync/fdatasync and never FUA, so the cache filter sees every sync.
 *
 * Rule kept throughout: never stat, list or open anything on a FUSE mount whose daemon may
 * be dead (the call blocks forever); whether something is mounted is read from
 * /proc/self/mountinfo. Processes are killed by pid only, never by name.
 */
import { spawn, spawnSync, execFile, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export type DiskMode = 'honest' | 'lying' | 'writethru' | 'subtle'
export const diskModes: readonly DiskMode[] = Object.freeze(['honest', 'lying', 'writethru', 'subtle'] as const)

export interface LabOptions {
  mode: DiskMode
  /** Size of the disk image; default 128. */
  imageSizeMiB?: number
  /** Where the image, socket, mounts and logs live; default a fresh mkdtemp under os.tmpdir(). */
  workDir?: string
}

type CacheSetting = 'writeback' | 'unsafe' | 'none' | 'subtle'
const cacheFor: Record<DiskMode, CacheSetting> = { honest: 'writeback', lying: 'unsafe', writethru: 'none', subtle: 'subtle' }

/**
 * The subtle disk's cache: writeback, 64 KiB blocks (the default), at most 1 MiB. nbdkit 1.32's
 * reclaim (filters/cache/reclaim.c) punches a block out of the cache file whether it is dirty or
 * not; it spares recently used blocks first, so it drops a dirty block only when the whole small
 * cache is recent, which is what a small cache under a sync-per-record writer becomes.
 * Measured with a writer independent of plugcheck (numbered 8 KiB records appended to a file on
 * the ext4, fdatasync after each, counted only once fdatasync returned; a cut after 1.5-2 s; the
 * records read back after the reboot): 10/887, 10/892, 48/942, 10/873, 16/1256 and 51/945
 * acknowledged records lost; the same records overwritten in place in an 8 MiB file: 1, 6, 8 and
 * 7 of ~1000 lost. Every cut lost some, none lost most. The honest disk (no cache-max-size) lost
 * none under the same writer. With 4 KiB cache blocks (cache-min-block-size=4096) and 1 MiB it
 * lost none in 3 cuts: more blocks leave room for the recent ones, so keep the 64 KiB default.
 */
export const subtleCacheArgs: readonly string[] = Object.freeze(['cache=writeback', 'cache-max-size=1M'])

const upTimeoutMs = 5000
const commandTimeoutMs = 10_000
const pollIntervalMs = 20
const fusectlDir = '/sys/fs/fuse/connections'
// sun_path is 108 bytes including the terminating NUL.
const maxSocketPathBytes = 107

const requiredCommands: ReadonlyArray<[command: string, pkg: string]> = [
  ['nbdkit', 'nbdkit'],
  ['nbdfuse', 'libnbd-bin'],
  ['mkfs.ext4', 'e2fsprogs'],
  ['losetup', 'mount'],
  ['umount', 'mount'],
  ['mount', 'mount'],
]

function findCommand(command: string): string | null {
  // root's PATH usually has the sbin dirs, a user's may not; mkfs.ext4 and losetup live there.
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin']
  for (const dir of dirs) {
    if (!dir) continue
    const candidate = path.join(dir, command)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {
      // not in this dir
    }
  }
  return null
}

/** null when the lab can run here; otherwise one sentence saying exactly why not. */
export function labUnavailableReason(): string | null {
  if (process.platform !== 'linux') return `the power-cut lab needs Linux, this is ${process.platform}.`
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    return 'the power-cut lab needs root (it mounts FUSE and ext4 and sets up loop devices).'
  }
  if (!fs.existsSync('/dev/fuse')) return 'the power-cut lab needs /dev/fuse, which does not exist here.'
  const missing = requiredCommands.filter(([command]) => findCommand(command) === null)
  if (missing.length > 0) {
    const what = missing.map(([command, pkg]) => `${command} (Debian package ${pkg})`).join(', ')
    return `the power-cut lab needs commands that are not installed: ${what}.`
  }
  return null
}

// ---------------------------------------------------------------------------------------------
// /proc/self/mountinfo

interface MountEntry {
  mountPoint: string
  major: number
  minor: number
}

function unescapeMountField(field: string): string {
  // mountinfo escapes space, tab, newline and backslash as \ooo.
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)))
}

function readMounts(): MountEntry[] {
  const text = fs.readFileSync('/proc/self/mountinfo', 'utf8')
  const mounts: MountEntry[] = []
  for (const line of text.split('\n')) {
    if (!line) continue
    const fields = line.split(' ')
    const [major, minor] = fields[2].split(':').map(Number)
    mounts.push({ mountPoint: unescapeMountField(fields[4]), major, minor })
  }
  return mounts
}

function findMount(mountPoint: string): MountEntry | undefined {
  // The last entry wins when something was mounted over an older mount at the same place.
  return readMounts().filter((m) => m.mountPoint === mountPoint).pop()
}

function isMounted(mountPoint: string): boolean {
  return readMounts().some((m) => m.mountPoint === mountPoint)
}

function mountsUnder(dir: string): string[] {
  return readMounts()
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(dir + '/'))
}

/** The /sys/fs/fuse/connections/N directory name for a FUSE mount, or null if not mounted. */
function fuseConnectionId(mountPoint: string): number | null {
  const mount = findMount(mountPoint)
  // The connection is named after the kernel dev_t of the superblock: MKDEV(major, minor).
  return mount ? mount.major * 2 ** 20 + mount.minor : null
}

// ---------------------------------------------------------------------------------------------
// loop devices

/** A loop device and the FUSE file it was attached to. */
export interface LoopDevice {
  device: string
  backingFile: string
}

/**
 * Whether a loop device is still bound to this FUSE file. Read from sysfs: losetup's own
 * LOOP_GET_STATUS64 stats the backing file and fails with ENOTCONN once FUSE is aborted.
 * After a lazy unmount of the FUSE mount the kernel shows the backing path relative to that
 * mount ("/name"), which is why every lab gives its FUSE file a unique name.
 */
function loopStillBound(loop: LoopDevice): boolean {
  try {
    const backing = fs.readFileSync(`/sys/block/${path.basename(loop.device)}/loop/backing_file`, 'utf8').trim()
    return backing === loop.backingFile || backing === '/' + path.basename(loop.backingFile)
  } catch {
    return false
  }
}

// ---------------------------------------------------------------------------------------------
// processes and commands

/** Dead includes zombies: an orphan's zombie may linger if pid 1 does not reap. */
function isAlive(pid: number): boolean {
  let stat: string
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return false
  }
  // The state follows the parenthesised command name, which may itself contain ") ".
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  return state !== 'Z' && state !== 'X'
}

function killNow(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // already gone
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

async function waitFor(what: string, ready: () => boolean, timeoutMs = upTimeoutMs): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (ready()) return
    if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms`)
    await sleep(pollIntervalMs)
  }
}

function run(command: string, args: string[], timeoutMs = commandTimeoutMs): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) {
        const why = stderr.trim() || (error.killed ? `timed out after ${timeoutMs} ms` : error.message)
        reject(new Error(`${command} ${args.join(' ')} failed: ${why}`))
      } else {
        resolve(stdout)
      }
    })
  })
}

function runSync(command: string, args: string[]): void {
  spawnSync(command, args, { stdio: 'ignore', timeout: upTimeoutMs })
}

function readPidFile(file: string): number | null {
  try {
    const pid = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10)
    return Number.isInteger(pid) && pid > 0 ? pid : null
  } catch {
    return null
  }
}

function logTail(file: string, maxBytes = 2000): string {
  try {
    const text = fs.readFileSync(file, 'utf8').trim()
    return text.length > maxBytes ? '...' + text.slice(-maxBytes) : text
  } catch {
    return ''
  }
}

function warn(message: string): void {
  process.stderr.write(`plugcheck lab: ${message}\n`)
}

// ---------------------------------------------------------------------------------------------
// the lab

type LabState = 'running' | 'cut' | 'down'

/** Every lab not yet torn down, so an exiting process can still clean up after them. */
const liveLabs = new Set<Lab>()

export class Lab {
  readonly mode: DiskMode
  readonly workDir: string
  readonly mountPoint: string

  private readonly ownsWorkDir: boolean
  private readonly imagePath: string
  private readonly socketPath: string
  private readonly fuseMountPoint: string
  private readonly fuseFile: string
  private readonly cacheTmpDir: string
  private readonly nbdkitPidFile: string
  private readonly nbdfusePidFile: string
  private readonly nbdkitLog: string
  private readonly nbdfuseLog: string

  private state: LabState = 'down'
  private children: ChildProcess[] = []
  private currentPids: number[] = []
  private readonly everyPid = new Set<number>()
  private currentLoop: LoopDevice | null = null
  private readonly everyLoop: LoopDevice[] = []
  private teardownPromise: Promise<void> | null = null

  private constructor(mode: DiskMode, workDir: string, ownsWorkDir: boolean) {
    this.mode = mode
    this.workDir = workDir
    this.ownsWorkDir = ownsWorkDir
    this.imagePath = path.join(workDir, 'disk.img')
    this.socketPath = path.join(workDir, 'nbd.sock')
    this.fuseMountPoint = path.join(workDir, 'mnt', 'fuse')
    // Unique across labs, see loopStillBound.
    const token = `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
    this.fuseFile = path.join(this.fuseMountPoint, `plugcheck-disk-${token}`)
    this.mountPoint = path.join(workDir, 'mnt', 'ext4')
    this.cacheTmpDir = path.join(workDir, 'cachetmp')
    this.nbdkitPidFile = path.join(workDir, 'nbdkit.pid')
    this.nbdfusePidFile = path.join(workDir, 'nbdfuse.pid')
    this.nbdkitLog = path.join(workDir, 'nbdkit.log')
    this.nbdfuseLog = path.join(workDir, 'nbdfuse.log')
  }

  static async create(opts: LabOptions): Promise<Lab> {
    const reason = labUnavailableReason()
    if (reason) throw new Error(reason)
    if (!diskModes.includes(opts.mode)) throw new Error(`unknown disk mode ${String(opts.mode)}`)
    const imageSizeMiB = opts.imageSizeMiB ?? 128
    // mkfs.ext4 with a journal wants a few MiB at least.
    if (!Number.isInteger(imageSizeMiB) || imageSizeMiB < 16) {
      throw new Error(`imageSizeMiB must be an integer >= 16, got ${imageSizeMiB}`)
    }

    let workDir: string
    let ownsWorkDir: boolean
    if (opts.workDir) {
      ownsWorkDir = !fs.existsSync(opts.workDir)
      fs.mkdirSync(opts.workDir, { recursive: true })
      workDir = fs.realpathSync(opts.workDir)
    } else {
      // realpath: mountinfo shows resolved paths, and we compare against them.
      workDir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'plugcheck-lab-')))
      ownsWorkDir = true
    }

    const lab = new Lab(opts.mode, workDir, ownsWorkDir)
    if (Buffer.byteLength(lab.socketPath) > maxSocketPathBytes) {
      if (ownsWorkDir) fs.rmSync(workDir, { recursive: true, force: true })
      throw new Error(`workDir is too long for a unix socket path: ${lab.socketPath}`)
    }
    trackLab(lab)
    try {
      fs.mkdirSync(lab.fuseMountPoint, { recursive: true })
      fs.mkdirSync(lab.mountPoint, { recursive: true })
      fs.mkdirSync(lab.cacheTmpDir, { recursive: true })
      fs.rmSync(lab.imagePath, { force: true })
      const fd = fs.openSync(lab.imagePath, 'w')
      fs.ftruncateSync(fd, imageSizeMiB * 1024 * 1024)
      fs.closeSync(fd)
      // Lazy init off: otherwise ext4 keeps zeroing inode tables in the background after mount,
      // which adds writes the writer did not make.
      await run('mkfs.ext4', ['-q', '-F', '-E', 'lazy_itable_init=0,lazy_journal_init=0', lab.imagePath])
      await lab.startDisk(cacheFor[opts.mode])
      // The writer under test need not run as root.
      fs.chmodSync(lab.mountPoint, 0o777)
    } catch (error) {
      await lab.teardown()
      throw error
    }
    return lab
  }

  /** Pids of every nbdkit and nbdfuse this lab started, for checking they are gone. */
  get diskPids(): readonly number[] {
    return [...this.everyPid]
  }

  /** Every loop device this lab attached, for checking they are released. */
  get loopDevices(): readonly LoopDevice[] {
    return this.everyLoop.map((l) => ({ ...l }))
  }

  /**
   * Drops the host's page cache of the disk's FUSE file (its clean pages), so that what is read next
   * comes from the disk (nbdkit and its cache filter), as on a machine with nothing between its file
   * system and its drive: the loop device writes through that page cache, which otherwise serves a
   * read-back the block the disk has dropped. Only while the disk runs (a FUSE file whose daemon may
   * be dead is never touched).
   */
  async dropHostCache(): Promise<void> {
    if (this.state !== 'running') return
    await run('dd', [`if=${this.fuseFile}`, 'iflag=nocache', 'count=0', 'status=none'])
  }

  /** The power cut; SIGKILLs extraPids (the writer) at the same moment as nbdkit and nbdfuse. */
  async cut(extraPids: number[] = []): Promise<void> {
    if (this.state !== 'running') throw new Error(`cut() needs a running lab, this one is ${this.state}`)
    // Read before the kill: reading mountinfo is always safe, but do as little as possible after.
    const connectionId = fuseConnectionId(this.fuseMountPoint)
    for (const pid of [...extraPids, ...this.currentPids]) killNow(pid)
    this.state = 'cut'
    // Whatever the kernel still has queued for the dead daemon fails instead of hanging.
    this.abortFuse(connectionId)
    await this.dismantle()
  }

  /**
   * Serve the same image again and mount it (journal replay). By default with no cache filter, so
   * what verify reads is exactly what reached the image; `{ sameDisk: true }` serves it with this
   * lab's mode again, as a machine's drive comes back after a power cycle (a campaign's next cycle
   * must run on the same kind of disk).
   */
  async reboot(options: { sameDisk?: boolean } = {}): Promise<void> {
    if (this.state !== 'cut') throw new Error(`reboot() needs a cut lab, this one is ${this.state}`)
    await this.startDisk(options.sameDisk === true ? cacheFor[this.mode] : 'none')
    fs.chmodSync(this.mountPoint, 0o777)
  }

  /** Idempotent; removes every mount, loop device, process and the workDir it made; never throws. */
  teardown(): Promise<void> {
    this.teardownPromise ??= this.teardownOnce().catch((error: unknown) => {
      warn(`teardown of ${this.workDir} failed: ${error instanceof Error ? error.message : String(error)}`)
    })
    return this.teardownPromise
  }

  private async teardownOnce(): Promise<void> {
    if (this.state === 'running' && isMounted(this.mountPoint)) {
      // A clean unmount first spares dmesg a flood of I/O errors; if it fails (a writer still
      // has files open) the cut below takes care of it.
      await run('umount', [this.mountPoint], upTimeoutMs).catch(() => undefined)
    }
    const connectionId = fuseConnectionId(this.fuseMountPoint)
    for (const pid of this.currentPids) killNow(pid)
    this.state = 'down'
    this.abortFuse(connectionId)
    await this.dismantle()
    await this.waitForLoopRelease()
    untrackLab(this)
    this.removeFiles()
  }

  /** Start nbdkit and nbdfuse, attach a loop device and mount the ext4. */
  private async startDisk(cache: CacheSetting): Promise<void> {
    fs.rmSync(this.socketPath, { force: true })
    fs.rmSync(this.nbdkitPidFile, { force: true })
    fs.rmSync(this.nbdfusePidFile, { force: true })
    this.state = 'running'

    const filterArgs = cache === 'none' ? [] : ['--filter=cache']
    const cacheArgs = cache === 'none' ? [] : cache === 'subtle' ? [...subtleCacheArgs] : [`cache=${cache}`]
    const nbdkit = this.startDaemon(
      'nbdkit',
      ['-f', '-U', this.socketPath, '-P', this.nbdkitPidFile, ...filterArgs, 'file', this.imagePath, ...cacheArgs],
      this.nbdkitLog,
    )
    const nbdkitPid = await this.waitForPidFile('nbdkit', nbdkit, this.nbdkitPidFile, this.nbdkitLog)
    this.currentPids.push(nbdkitPid)
    this.everyPid.add(nbdkitPid)
    await waitFor(`nbdkit did not create its socket ${this.socketPath}`, () => fs.existsSync(this.socketPath))

    // -C 1: one connection, so flushes and writes are ordered on one stream.
    const nbdfuse = this.startDaemon(
      'nbdfuse',
      ['-C', '1', '-P', this.nbdfusePidFile, this.fuseFile, '--unix', this.socketPath],
      this.nbdfuseLog,
    )
    const nbdfusePid = await this.waitForPidFile('nbdfuse', nbdfuse, this.nbdfusePidFile, this.nbdfuseLog)
    this.currentPids.push(nbdfusePid)
    this.everyPid.add(nbdfusePid)
    await waitFor(`nbdfuse did not mount ${this.fuseMountPoint}`, () => isMounted(this.fuseMountPoint))

    // The abort switch of a dead FUSE connection lives in fusectl; mount it now, not during a cut.
    if (fs.existsSync(fusectlDir) && !isMounted(fusectlDir)) {
      await run('mount', ['-t', 'fusectl', 'none', fusectlDir]).catch((error: unknown) => {
        warn(`cannot mount fusectl, a cut may not be able to abort FUSE: ${String(error)}`)
      })
    }

    const device = (await run('losetup', ['--find', '--show', this.fuseFile])).trim()
    if (!device.startsWith('/dev/loop')) throw new Error(`losetup --find --show gave no loop device: ${device}`)
    this.currentLoop = { device, backingFile: this.fuseFile }
    this.everyLoop.push(this.currentLoop)
    await run('mount', ['-t', 'ext4', device, this.mountPoint])
  }

  private startDaemon(command: string, args: string[], logFile: string): ChildProcess {
    const logFd = fs.openSync(logFile, 'a')
    try {
      // detached = setsid: a terminal's Ctrl-C must not kill the disk before we cut it ourselves.
      const child = spawn(command, args, {
        detached: true,
        stdio: ['ignore', logFd, logFd],
        env: { ...process.env, TMPDIR: this.cacheTmpDir },
      })
      child.on('error', (error) => warn(`${command}: ${error.message}`))
      // Do not keep the event loop alive for the disk; teardown and the exit hooks end it.
      child.unref()
      this.children.push(child)
      return child
    } finally {
      fs.closeSync(logFd)
    }
  }

  private async waitForPidFile(name: string, child: ChildProcess, pidFile: string, logFile: string): Promise<number> {
    const found = { pid: 0 }
    try {
      await waitFor(`${name} did not write its pid file ${pidFile}`, () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`${name} exited early (${child.exitCode ?? child.signalCode}): ${logTail(logFile)}`)
        }
        found.pid = readPidFile(pidFile) ?? 0
        return found.pid > 0
      })
    } catch (error) {
      // The pid file never came, so kill the one process we know by its spawn pid.
      if (child.pid) {
        killNow(child.pid)
        this.everyPid.add(child.pid)
      }
      throw error
    }
    return found.pid
  }

  private abortFuse(connectionId: number | null): void {
    if (connectionId === null) return
    try {
      fs.writeFileSync(path.join(fusectlDir, String(connectionId), 'abort'), '1')
    } catch {
      // The connection went away already when its daemon died.
    }
  }

  /** After every disk process is dead: unmount, detach, wait for the processes to be gone. */
  private async dismantle(): Promise<void> {
    if (isMounted(this.mountPoint)) {
      // Lazy: the final unmount waits for the writer's open files, and its writes fail with EIO.
      await run('umount', ['-l', this.mountPoint]).catch((error: unknown) => warn(String(error)))
    }
    if (this.currentLoop) {
      // A loop device still held by the lazily unmounted ext4 is set to autoclear instead.
      await run('losetup', ['-d', this.currentLoop.device]).catch((error: unknown) => warn(String(error)))
      this.currentLoop = null
    }
    if (isMounted(this.fuseMountPoint)) {
      await run('umount', [this.fuseMountPoint]).catch(() =>
        run('umount', ['-l', this.fuseMountPoint]).catch((error: unknown) => warn(String(error))),
      )
    }
    const pids = this.currentPids
    this.currentPids = []
    this.children = []
    await waitFor(`disk processes ${pids.join(', ')} did not die`, () => !pids.some(isAlive)).catch(
      (error: unknown) => warn(String(error)),
    )
    fs.rmSync(this.socketPath, { force: true })
  }

  /**
   * A detached loop device stays bound (set to autoclear) while the lazily unmounted ext4 on
   * it lives, that is until the last process with a file open in it has exited.
   */
  private async waitForLoopRelease(): Promise<void> {
    const deadline = Date.now() + upTimeoutMs
    for (;;) {
      const busy = this.everyLoop.filter(loopStillBound)
      if (busy.length === 0) return
      if (Date.now() > deadline) {
        const names = busy.map((l) => l.device).join(', ')
        warn(`loop devices ${names} still bound after ${upTimeoutMs} ms: a process still has files open in the lab's ext4`)
        return
      }
      await sleep(pollIntervalMs)
    }
  }

  private removeFiles(): void {
    const leftover = mountsUnder(this.workDir)
    if (leftover.length > 0) {
      // Removing files under a live mount would walk into it; leave everything for a human.
      warn(`not removing ${this.workDir}: still mounted: ${leftover.join(', ')}`)
      return
    }
    try {
      if (this.ownsWorkDir) {
        fs.rmSync(this.workDir, { recursive: true, force: true })
      } else {
        for (const entry of ['disk.img', 'nbd.sock', 'mnt', 'cachetmp', 'nbdkit.pid', 'nbdfuse.pid', 'nbdkit.log', 'nbdfuse.log']) {
          fs.rmSync(path.join(this.workDir, entry), { recursive: true, force: true })
        }
      }
    } catch (error) {
      warn(`cannot remove ${this.workDir}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }

  /** Best effort for a dying process: no awaiting, only synchronous calls. */
  teardownSync(): void {
    if (!liveLabs.has(this)) return
    untrackLab(this)
    const connectionId = fuseConnectionId(this.fuseMountPoint)
    for (const pid of this.currentPids) killNow(pid)
    for (const child of this.children) if (child.pid) killNow(child.pid)
    this.state = 'down'
    this.abortFuse(connectionId)
    if (isMounted(this.mountPoint)) runSync('umount', ['-l', this.mountPoint])
    for (const loop of this.everyLoop.filter(loopStillBound)) runSync('losetup', ['-d', loop.device])
    if (isMounted(this.fuseMountPoint)) runSync('umount', ['-l', this.fuseMountPoint])
    this.removeFiles()
  }
}

/** For tap: creates a Lab and registers t.teardown(() => lab.teardown()). */
export async function labFor(t: { teardown(fn: () => unknown): void }, opts: LabOptions): Promise<Lab> {
  const lab = await Lab.create(opts)
  t.teardown(() => lab.teardown())
  return lab
}

// SIGALRM is how tap ends a test process that timed out; none of these run 'exit' handlers.
const fatalSignals = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGALRM'] as const

function onFatalSignal(signal: NodeJS.Signals): void {
  tearDownAllSync()
  // Our listener disabled the default action. With it gone, re-raise so the process still dies
  // of the signal, or so other listeners (tap's signal-exit) see it again, now without us.
  process.kill(process.pid, signal)
}

/** Hooks are installed only while a lab lives, so they never change signal handling otherwise. */
function trackLab(lab: Lab): void {
  if (liveLabs.size === 0) {
    process.on('exit', tearDownAllSync)
    for (const signal of fatalSignals) process.on(signal, onFatalSignal)
  }
  liveLabs.add(lab)
}

function untrackLab(lab: Lab): void {
  if (!liveLabs.delete(lab) || liveLabs.size > 0) return
  process.removeListener('exit', tearDownAllSync)
  for (const signal of fatalSignals) process.removeListener(signal, onFatalSignal)
}

function tearDownAllSync(): void {
  for (const lab of [...liveLabs]) {
    try {
      lab.teardownSync()
    } catch (error) {
      warn(`emergency teardown of ${lab.workDir} failed: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
}
