// Builds tap for the plugin set .taprc names, before a run, when the installed build differs.
//
// tap compiles its Test class for a set of plugins. After `npm ci` it is built for tap's defaults,
// which load TypeScript through ts-node; .taprc swaps that for a loader of ours. tap notices the
// difference and rebuilds itself, but only inside a run that has already chosen each test process's
// loaders from the old build: every file of that first run goes through ts-node (about twice the
// suite's CPU). Run as `npm test`'s pretest, this builds first. Plain JavaScript: it runs before
// anything is compiled. Prints nothing when the build is current.
import { spawnSync } from 'node:child_process'

/** Whether tap is built for .taprc's plugins; false too when the build cannot load (a plugin of it is gone). */
async function builtForConfig() {
  try {
    const { TapConfig } = await import('@tapjs/config')
    const { signature } = await import('@tapjs/test')
    return (await TapConfig.load()).pluginSignature === signature
  } catch {
    return false
  }
}

if (!(await builtForConfig())) {
  process.stderr.write('tap is built for other plugins than .taprc names: building it for them (tap build)\n')
  const build = spawnSync('npx', ['tap', 'build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (build.status !== 0) {
    process.stderr.write(`tap build failed (${build.error?.message ?? `exit ${build.status ?? build.signal}`})\n`)
    process.exit(1)
  }
}
