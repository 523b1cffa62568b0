#!/usr/bin/env node
// The plugcheck command. Runs the compiled dist/bin.js, which `npm ci` builds (the "prepare" script).
// In a checkout whose src/ changed after that build, it runs the sources through tsx (a dev
// dependency) instead, so an edit is never silently ignored; `npm run build` makes it fast again.
// Plain JavaScript, loaded before anything is compiled: it only stats files, it imports nothing else.
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))

/** Milliseconds of the newest modification of path or anything under it (-1 if it is missing). */
function newestMtimeMs(path) {
  const stats = statSync(path, { throwIfNoEntry: false })
  if (stats === undefined) return -1
  let newest = stats.mtimeMs
  if (stats.isDirectory()) for (const name of readdirSync(path)) newest = Math.max(newest, newestMtimeMs(join(path, name)))
  return newest
}

function fail(message, hint) {
  process.stderr.write(`plugcheck: ${message}\nhint: ${hint}\n`)
  process.exit(3)
}

// The build stamps dist/bin.js with the time it started: a source saved during the build counts as newer.
const builtMs = statSync(join(root, 'dist', 'bin.js'), { throwIfNoEntry: false })?.mtimeMs ?? -1
const sourcesMs = newestMtimeMs(join(root, 'src'))
if (builtMs >= sourcesMs && builtMs >= 0) {
  await import('../dist/bin.js')
} else if (sourcesMs < 0) {
  fail('dist/bin.js is missing: this installation is incomplete', 'install plugcheck again')
} else {
  let tsx
  try {
    tsx = await import('tsx/esm/api')
  } catch {
    fail(`dist/ ${builtMs < 0 ? 'is missing' : 'is older than src/'} and tsx is not installed`, 'run npm run build (or npm ci)')
  }
  const why = builtMs < 0 ? 'dist/ is not built' : 'src/ is newer than dist/'
  if (process.stderr.isTTY) process.stderr.write(`plugcheck: ${why}: running the sources through tsx (npm run build makes start-up fast)\n`)
  tsx.register()
  await import('../src/bin.ts')
}
