/**
 * plugcheck's version, from wherever it runs: the builds (dist/ and the single executables) write
 * package.json's version into the bundle (esbuild's define of PLUGCHECK_VERSION), so a global install
 * or an executable copied to another machine knows it without a package.json beside it; the sources
 * (through tsx, in a checkout) read package.json two folders up. yargs' own lookup searches from the
 * working directory and the entry file, and answered "unknown" for dist/bin.js run from elsewhere.
 */
import { readFileSync } from 'node:fs'

declare const PLUGCHECK_VERSION: string | undefined

/** The version the build wrote in, else package.json's beside the sources, else "unknown". */
export function plugcheckVersion(): string {
  if (typeof PLUGCHECK_VERSION === 'string') return PLUGCHECK_VERSION
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'))
    const version = (pkg as { version?: unknown }).version
    return typeof version === 'string' ? version : 'unknown'
  } catch {
    return 'unknown'
  }
}
