/**
 * Shared by the tests under test/windows/: plugcheck's Windows build run under Wine (scripts/wine.ts
 * sets it up once under node_modules/.cache/plugcheck-wine). A test that needs Wine calls ensureWine() first:
 * where Wine is missing it fails with the reason and the package to install (.ci/run installs it).
 */
export { distBin, ensureWine, nodeExePath, runWine, runWineNode, wineAvailable, winePath, type WineRunOptions, type WineRunResult } from '../../scripts/wine.js'

/** Enough for a cold Wine prefix's first node.exe start on a loaded 2-core machine. */
export const wineRunTimeoutMs = 120_000
