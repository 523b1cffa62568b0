/**
 * The main script of plugcheck's single executables (bundled as CommonJS by scripts/build-exe.ts):
 * unpacks and checks the assets (sea.ts), then imports the bundle of bin.ts from the checked
 * directory. The bundle is an ES module (it awaits at its top level), which Node runs from a file.
 */
import { getAsset, getRawAsset } from 'node:sea'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describeSystemError, PlugcheckError } from '../base/errors.js'
import { ensureWritableStdio } from '../base/stdio-fallback.js'
import { cacheRoot, ensureUnpacked, markSingleExecutable, type SeaManifest } from './sea.js'

function fail(text: string): void {
  process.stderr.write(`plugcheck: ${text}\n`)
  process.exitCode = 3
}

function start(): void {
  // Before anything is printed: under Wine, a Unix pipe as stdout or stderr is written to directly.
  ensureWritableStdio()
  const manifest = JSON.parse(getAsset('manifest.json', 'utf8')) as SeaManifest
  const root = cacheRoot(process.env, process.platform)
  let dir: string
  try {
    dir = ensureUnpacked(
      manifest,
      root,
      (name) => new Uint8Array(getRawAsset(name) as ArrayBuffer),
      (text) => process.stderr.write(`plugcheck: ${text}\n`),
    )
  } catch (error) {
    if (error instanceof PlugcheckError) {
      fail(`${error.message}\nhint: ${error.hint}`)
      return
    }
    const hint = process.platform === 'win32' ? 'set LOCALAPPDATA to a writable directory' : 'set XDG_CACHE_HOME to a writable directory'
    fail(`could not unpack its native modules under ${root}: ${describeSystemError(error)}\nhint: ${hint}`)
    return
  }
  markSingleExecutable(dir)
  import(pathToFileURL(join(dir, manifest.entry)).href).catch((error: Error) =>
    fail(`internal error: could not load its modules: ${error?.stack ?? String(error)}`),
  )
}

start()
