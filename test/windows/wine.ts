/**
 * Shared by the tests under test/windows/: plugcheck's Windows build run under Wine (scripts/wine.ts
 * sets it up once under node_modules/.cache/plugcheck-wine).
 */
import { wineAvailable } from '../../scripts/wine.js'

export { distBin, ensureWine, nodeExePath, runWine, runWineNode, wineAvailable, winePath, type WineRunOptions, type WineRunResult } from '../../scripts/wine.js'

/** Enough for a cold Wine prefix's first node.exe start on a loaded 2-core machine. */
export const wineRunTimeoutMs = 120_000

/**
 * tap options for a test that needs Wine: skipped with the reason where Wine is missing, except under
 * CI=true, where the test runs and fails on the missing tool (ensureWine throws the reason).
 */
export function needsWine(): { skip: string | false } {
  if (process.env.CI === 'true') return { skip: false }
  return { skip: wineAvailable() ?? false }
}
