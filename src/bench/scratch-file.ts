/**
 * The benchmark's scratch file: created by us, recognisable as ours, removed at exit and on
 * SIGINT/SIGTERM/SIGHUP.
 *
 * Layout: [0, 4 KiB) a header naming the file as plugcheck bench's; [4 KiB, 4 KiB + 16 MiB) the
 * measured region (pg_test_fsync's 16 MB WAL segment), written in full with random bytes and
 * fsynced before any test. Writing it (rather than fallocate) matters: ext4 keeps fallocated
 * extents "unwritten", and converting them would add a journal commit to every first overwrite.
 *
 * We never overwrite a file that is not ours: an existing path is reused only if its header says
 * bench created it (a run killed by SIGKILL leaves one behind).
 *
 * Signals: the measuring loop is synchronous and yields to the event loop between short slices
 * (see sections/measure.ts), so a signal handler runs within one slice; it only records the signal,
 * and the run unwinds through its normal cleanup.
 */
import { randomBytes, randomFillSync } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describeSystemError, usageError } from '../base/errors.js'
import { directAlignmentBytes, nativePort } from '../native/index.js'
import { seqOfRecordFile, seqOfTempFile } from '../record/files-layout.js'

export const scratchHeaderBytes = 4096
/** pg_test_fsync's file size (DEFAULT_XLOG_SEG_SIZE). */
export const scratchRegionBytes = 16 * 1024 * 1024
/** Passes over the region alternate between two windows of the random source this far apart, so a pass never rewrites the bytes already there. */
export const sourceShiftBytes = 64 * 1024
const headerMagic = 'plugcheck bench scratch file\n'
const maxCreateAttempts = 100
const handledSignals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
export type HandledSignal = (typeof handledSignals)[number]

export interface ScratchFile {
  readonly path: string
  /** An O_RDWR descriptor held for the whole run: fstatfs, and the fsync before each test. */
  readonly controlFd: number
  readonly regionStartBytes: number
  readonly regionBytes: number
  /** Random bytes, 4 KiB aligned, regionBytes + sourceShiftBytes long: what every test writes. */
  readonly source: Buffer
  /**
   * The metadata section's directory beside the file (PATH.files), made by its first row and removed
   * with the file: it only ever holds the record names of write --pattern files (filesDirectoryEntries).
   */
  readonly filesDirectory: string
}

/** Thrown out of the measuring loop when a signal asked us to stop. */
export class BenchInterrupted extends Error {
  constructor(readonly signal: HandledSignal) {
    super(`interrupted by ${signal}`)
    this.name = 'BenchInterrupted'
  }
}

function isOurs(file: string): boolean {
  let fd: number
  try {
    fd = fs.openSync(file, 'r')
  } catch {
    return false
  }
  try {
    const head = Buffer.alloc(headerMagic.length)
    return fs.readSync(fd, head, 0, head.length, 0) === head.length && head.toString('latin1') === headerMagic
  } finally {
    fs.closeSync(fd)
  }
}

function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory()
  } catch {
    return false
  }
}

function openFailure(file: string, error: unknown): Error {
  return usageError(
    `could not create ${file}: ${describeSystemError(error)}`,
    'give --file a path on the file system to test, in a directory you can write',
  )
}

/** Creates plugcheck-bench.<random> in dir, never reusing a name. */
function createInDirectory(dir: string): { file: string; fd: number } {
  for (let attempt = 0; attempt < maxCreateAttempts; attempt++) {
    const file = path.join(dir, `plugcheck-bench.${randomBytes(3).toString('base64url').slice(0, 4)}`)
    try {
      return { file, fd: fs.openSync(file, 'wx+', 0o600) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw openFailure(file, error)
    }
  }
  throw usageError(`could not find a free plugcheck-bench.<random> name in ${dir}`)
}

function openRequested(file: string): { file: string; fd: number } {
  try {
    return { file, fd: fs.openSync(file, 'wx+', 0o600) }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw openFailure(file, error)
  }
  if (!isOurs(file)) {
    throw usageError(
      `refusing to overwrite ${file}: it exists and is not a file plugcheck bench created`,
      'remove it, or give --file a new path or a directory',
    )
  }
  try {
    return { file, fd: fs.openSync(file, 'r+') }
  } catch (error) {
    throw openFailure(file, error)
  }
}

/**
 * Creates (or reclaims) the scratch file and writes its header, so that it is recognisable as ours
 * from the start; the caller guards it, then fills it (fillScratchFile), and at the end removes it.
 * requested: undefined for a new file in cwd, a directory for a new file in it, or a file path.
 */
export function createScratchFile(requested: string | undefined, cwd: string = process.cwd()): ScratchFile {
  const target = requested === undefined ? cwd : path.resolve(cwd, requested)
  if (requested !== undefined && !isDirectory(target)) {
    const unsafe = nativePort().unsafeFileName(target)
    if (unsafe !== null)
      throw usageError(`refusing to create ${target}: ${unsafe}`, 'give --file another name, or a directory to create the scratch file in')
  }
  const { file, fd } = requested === undefined || isDirectory(target) ? createInDirectory(target) : openRequested(target)
  const scratch: ScratchFile = {
    path: file,
    controlFd: fd,
    regionStartBytes: scratchHeaderBytes,
    regionBytes: scratchRegionBytes,
    source: nativePort().alignedBuffer(scratchRegionBytes + sourceShiftBytes, directAlignmentBytes),
    filesDirectory: `${file}.files`,
  }
  try {
    const header = Buffer.alloc(scratchHeaderBytes)
    header.write(headerMagic, 0, 'latin1')
    header.write(JSON.stringify({ pid: process.pid, host: os.hostname(), createdMs: Date.now() }), headerMagic.length, 'utf8')
    fs.writeSync(fd, header, 0, header.length, 0)
  } catch (error) {
    removeScratchFile(scratch)
    throw usageError(`could not write ${file}: ${describeSystemError(error)}`)
  }
  return scratch
}

/** Writes the whole region with random bytes and makes it durable, as pg_test_fsync does before its tests. */
export function fillScratchFile(scratch: ScratchFile): void {
  try {
    // Incompressible payload: a device that compresses or dedups cannot flatter the figures.
    randomFillSync(scratch.source)
    for (let done = 0; done < scratch.regionBytes; ) {
      done += fs.writeSync(scratch.controlFd, scratch.source, done, scratch.regionBytes - done, scratch.regionStartBytes + done)
    }
    fs.ftruncateSync(scratch.controlFd, scratch.regionStartBytes + scratch.regionBytes)
    // Sync now so that the preparation's dirty pages don't skew the first test.
    fs.fsyncSync(scratch.controlFd)
  } catch (error) {
    throw usageError(
      `could not prepare ${scratch.path}: ${describeSystemError(error)}`,
      'the benchmark needs 16 MiB of free space on the file system under test',
    )
  }
}

const removed = new WeakSet<ScratchFile>()

/**
 * Makes the metadata directory, or empties one a killed run left (only the names bench makes there);
 * refuses (exit 2) one holding anything else, touching nothing.
 */
export function prepareFilesDirectory(scratch: ScratchFile): void {
  try {
    fs.mkdirSync(scratch.filesDirectory, { mode: 0o700 })
    filesDirectoryOurs.add(scratch)
    return
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw openFailure(scratch.filesDirectory, error)
  }
  const names = fs.readdirSync(scratch.filesDirectory)
  const foreign = names.find((name) => !isBenchRecordName(name))
  if (foreign !== undefined)
    throw usageError(`refusing to use ${scratch.filesDirectory}: it holds ${JSON.stringify(foreign)}, which plugcheck bench did not make`)
  filesDirectoryOurs.add(scratch)
  for (const name of names) fs.unlinkSync(path.join(scratch.filesDirectory, name))
}

/** The scratch files whose metadata directory this run made or emptied: only those are removed. */
const filesDirectoryOurs = new WeakSet<ScratchFile>()

function isBenchRecordName(name: string): boolean {
  return seqOfRecordFile(name) !== null || seqOfTempFile(name) !== null
}

/** Removes the metadata directory's files (only bench's names) and the directory; nothing when there is none. */
function removeFilesDirectory(scratch: ScratchFile): void {
  if (!filesDirectoryOurs.has(scratch)) return
  let names: string[]
  try {
    names = fs.readdirSync(scratch.filesDirectory)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw error
  }
  for (const name of names.filter(isBenchRecordName)) fs.unlinkSync(path.join(scratch.filesDirectory, name))
  fs.rmdirSync(scratch.filesDirectory)
}

/** Closes and unlinks (and removes the metadata directory); safe to call more than once. */
export function removeScratchFile(scratch: ScratchFile): void {
  if (removed.has(scratch)) return
  removed.add(scratch)
  removeFilesDirectory(scratch)
  try {
    fs.closeSync(scratch.controlFd)
  } catch {
    // already closed: nothing to do
  }
  try {
    fs.unlinkSync(scratch.path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
}

export interface ScratchGuard {
  /** The signal that asked us to stop, or null. */
  readonly interruptedBy: () => HandledSignal | null
  /** Removes the handlers; call after removeScratchFile. */
  readonly dispose: () => void
}

/**
 * Removes the file at process exit whatever happens, and turns SIGINT/SIGTERM/SIGHUP into a
 * request to stop that the measuring loop polls between slices.
 */
export function guardScratchFile(scratch: ScratchFile): ScratchGuard {
  let signal: HandledSignal | null = null
  const onExit = () => {
    try {
      removeScratchFile(scratch)
    } catch {
      // at exit there is no one left to tell
    }
  }
  const onSignal = (name: HandledSignal) => {
    signal ??= name
  }
  process.on('exit', onExit)
  for (const name of handledSignals) process.on(name, onSignal)
  return {
    interruptedBy: () => signal,
    dispose: () => {
      process.off('exit', onExit)
      for (const name of handledSignals) process.off(name, onSignal)
    },
  }
}
