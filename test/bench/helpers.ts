/** Shared by the bench tests: run the real CLI in a child process, make scratch directories. */
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
export const cliPath = path.join(repoRoot, 'bin/plugcheck.js')
/** Short tests keep the suite fast; 24 rows x 0.2 s is about 5 s per run. */
export const quickSecs = '0.2'

export interface CliResult {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

export function runCli(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): CliResult {
  const result = spawnSync(process.execPath, [cliPath, ...args], {
    cwd: options.cwd ?? repoRoot,
    env: { ...process.env, ...options.env },
    encoding: 'utf8',
    timeout: 120_000,
  })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

export { spawn }

/** A fresh directory under base (/dev/shm for speed, os.tmpdir() for a real disk), removed by the caller. */
export function scratchDir(base: string, t: { teardown: (fn: () => void) => void }): string {
  const root = fs.existsSync(base) ? base : os.tmpdir()
  const dir = fs.mkdtempSync(path.join(root, 'plugcheck-bench-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}
