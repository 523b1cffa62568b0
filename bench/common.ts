/**
 * Helpers shared by the benchmarks: running `plugcheck` as a child process, naming file systems,
 * and order statistics. Benchmarks print figures; they never pass or fail on a time threshold.
 *
 * Assumptions: Linux, run from the repository root or anywhere (paths are resolved from this file),
 * Node 20 with tsx loaded (`node --import tsx bench/<name>.ts`).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { statfsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = fileURLToPath(new URL('..', import.meta.url))
export const plugcheckBin = fileURLToPath(new URL('../bin/plugcheck.js', import.meta.url))

/** Where tmpfs lives on Linux: sync calls cost ~nothing there, so it measures pure tool overhead. */
export const tmpfsDir = '/dev/shm'

/** Same record size and file size on both sides of every comparison (plugcheck's superblock is one record). */
export const recordSizeBytes = 8192
export const dataFileSizeBytes = 64 * 1024 * 1024

const fileSystemMagics: ReadonlyMap<number, string> = new Map([
  [0xef53, 'ext4'],
  [0x01021994, 'tmpfs'],
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
])

/** "ext4", "tmpfs", ... or the statfs magic in hex. */
export function fileSystemName(dir: string): string {
  const magic = Number(statfsSync(dir).type)
  return fileSystemMagics.get(magic) ?? `0x${magic.toString(16)}`
}

export interface ChildResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to completion, collecting its output. */
export function runChild(command: string, args: readonly string[]): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** `plugcheck write` arguments shared by both benchmarks: fdatasync, 8 KiB records overwriting a 64 MiB region. */
export function plugcheckWriteArgs(port: number, file: string, durationS: number, extra: readonly string[] = []): string[] {
  return [
    plugcheckBin,
    'write',
    '--server',
    `127.0.0.1:${port}`,
    '--file',
    file,
    '--method',
    'fdatasync',
    '--pattern',
    'overwrite',
    '--size',
    String(dataFileSizeBytes),
    '--record-size',
    String(recordSizeBytes),
    '--duration',
    String(durationS),
    ...extra,
  ]
}

/** Records synced and acknowledged, from a one-run `plugcheck write` summary. */
export function recordsFromSummary(stdout: string): number {
  const match = /([\d,]+) records synced and acknowledged/.exec(stdout)
  if (match === null) throw new Error(`no record count in plugcheck's summary:\n${stdout}`)
  return Number(match[1]!.replaceAll(',', ''))
}

export interface ListenerProcess {
  readonly port: number
  readonly child: ChildProcess
  stop(): Promise<void>
}

const listenerStartTimeoutMs = 30_000

/** Starts `plugcheck listen` on 127.0.0.1 with an ephemeral port, as a separate process (bin: another tree's, for a baseline). */
export function startListenerProcess(
  storeDir: string,
  bin = plugcheckBin,
  startTimeoutMs = listenerStartTimeoutMs,
): Promise<ListenerProcess> {
  const child = spawn(process.execPath, [bin, 'listen', '--host', '127.0.0.1', '--port', '0', '--dir', storeDir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return new Promise((resolve, reject) => {
    let stdout = ''
    const timer = setTimeout(() => {
      child.kill('SIGTERM')
      reject(new Error(`plugcheck listen did not start within ${startTimeoutMs / 1000} s`))
    }, startTimeoutMs)
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`plugcheck listen exited early (code ${code}): ${stdout}`)))
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      stdout += s
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(stdout)
      if (match === null) return
      clearTimeout(timer)
      child.removeAllListeners('exit')
      resolve({
        port: Number(match[1]),
        child,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done()
            child.once('exit', () => done())
            child.kill('SIGTERM') // by this child's pid; the listener closes cleanly on SIGTERM
          }),
      })
    })
  })
}

/** The q-quantile (0..1) of values sorted ascending, nearest rank. */
/** --rounds and --seconds, checked: every bench takes the same two. */
export function roundsAndSeconds(values: { rounds: string; seconds: string }): { roundCount: number; durationS: number } {
  const roundCount = Number(values.rounds)
  const durationS = Number(values.seconds)
  if (!(roundCount >= 1 && durationS > 0)) throw new Error('--rounds must be >= 1 and --seconds > 0')
  return { roundCount, durationS }
}

export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.max(1, Math.ceil(q * sorted.length))
  return sorted[rank - 1]!
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const mid = sorted.length >>> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Formats rows as left-aligned columns; the first row is the header. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)))
  return rows.map((r) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ')).join('\n')
}

export function formatRate(perS: number): string {
  return `${Math.round(perS).toLocaleString('en-US')}/s`
}

/**
 * The reference loop. Args: path, file size, record size, seconds, run key (16 hex digits), and
 * optionally a TCP port on 127.0.0.1: then each record's fdatasync is followed by a blocking send of
 * an ack-sized frame (51 bytes, TCP_NODELAY), the floor for any tool that acks every record.
 * Prints "records seconds". Every return value is checked.
 */
const syncLoopSource = String.raw`
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint32_t fmix32(uint32_t x) {
  x ^= x >> 16; x *= 0x85ebca6bu; x ^= x >> 13; x *= 0xc2b2ae35u; x ^= x >> 16; return x;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void write_all(int fd, const unsigned char *buf, size_t len, off_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pwrite(fd, buf + done, len - done, off + done);
    if (n <= 0) { perror("pwrite"); exit(1); }
    done += n;
  }
}

int main(int argc, char **argv) {
  if (argc != 6 && argc != 7) { fprintf(stderr, "usage: %s path size record-size seconds key [port]\n", argv[0]); return 2; }
  const char *path = argv[1];
  long long size = atoll(argv[2]);
  size_t rec = (size_t)atol(argv[3]);
  double seconds = atof(argv[4]);
  uint64_t key = strtoull(argv[5], NULL, 16);
  uint32_t lo = (uint32_t)key, hi = (uint32_t)(key >> 32);
  uint64_t slots = (uint64_t)(size / rec) - 1; /* block 0 stands for plugcheck's superblock */

  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) { perror("open"); return 1; }
  size_t chunk = 4 << 20;
  unsigned char *zeros = calloc(1, chunk);
  for (long long off = 0; off < size; off += chunk)
    write_all(fd, zeros, (size_t)(size - off < (long long)chunk ? size - off : (long long)chunk), off);
  if (fsync(fd) != 0) { perror("fsync"); return 1; }
  free(zeros);

  int sock = -1;
  unsigned char frame[51] = {0, 0, 0, 47};
  if (argc == 7) {
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[6])) };
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int one = 1;
    sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof sa) != 0) { perror("connect"); return 1; }
    if (setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) { perror("setsockopt"); return 1; }
  }

  unsigned char *buf = aligned_alloc(4096, rec);
  for (size_t i = 0; i < rec / 4; i++) ((uint32_t *)buf)[i] = fmix32((uint32_t)i ^ lo);

  double start = now_s(), end = start + seconds, t = start;
  uint64_t seq = 0;
  while (t < end) {
    seq++;
    uint32_t seq_lo = (uint32_t)seq, seq_hi = (uint32_t)(seq >> 32);
    uint32_t h = fmix32(fmix32(lo ^ seq_lo) ^ ((hi ^ seq_hi) * 0x9e3779b1u));
    memcpy(buf + 16, &seq, 8); /* a fresh stamp per record, as plugcheck's */
    write_all(fd, buf, rec, (off_t)(rec * (1 + h % slots)));
    if (fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
    if (sock >= 0) {
      memcpy(frame + 40, &seq, 8);
      if (send(sock, frame, sizeof frame, MSG_NOSIGNAL) != (ssize_t)sizeof frame) { perror("send"); return 1; }
    }
    t = now_s();
  }
  printf("%llu %.6f\n", (unsigned long long)seq, t - start);
  if (sock >= 0) close(sock);
  return close(fd) == 0 ? 0 : 1;
}
`

/** Compiles the reference loop into dir with gcc; returns the binary's path. */
export async function buildSyncLoop(dir: string): Promise<string> {
  const source = join(dir, 'sync-loop.c')
  const binary = join(dir, 'sync-loop')
  writeFileSync(source, syncLoopSource)
  const gcc = await runChild('gcc', ['-O2', '-Wall', '-o', binary, source])
  if (gcc.code !== 0) throw new Error(`gcc failed:\n${gcc.stderr}`)
  return binary
}

/** Runs the reference loop on a fresh file for durationS; records per second of its own loop time. */
export async function runSyncLoop(binary: string, file: string, durationS: number, ackPort?: number): Promise<number> {
  const args = [file, String(dataFileSizeBytes), String(recordSizeBytes), String(durationS), randomBytes(8).toString('hex')]
  const result = await runChild(binary, ackPort === undefined ? args : [...args, String(ackPort)])
  if (result.code !== 0) throw new Error(`C loop failed (code ${result.code}): ${result.stderr}`)
  const [records, seconds] = result.stdout.trim().split(/\s+/).map(Number)
  return records! / seconds!
}
