// Builds tap for the plugin set .taprc names, before a run, when the installed build differs.
//
// tap compiles its Test class for a set of plugins. After `npm ci` it is built for tap's defaults,
// which load TypeScript through ts-node; .taprc swaps that for a loader of ours. tap notices the
// difference and rebuilds itself, but only inside a run that has already chosen each test process's
// loaders from the old build: every file of that first run goes through ts-node (about twice the
// suite's CPU). Run as `npm test`'s pretest, this builds first. Plain JavaScript: it runs before
// anything is compiled. Prints nothing when the build is current.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

// tap reads .taprc from the working directory up, and `npx tap` is the project's from there.
process.chdir(fileURLToPath(new URL('..', import.meta.url)))

/**
 * Whether tap is built for .taprc's plugins as they are now; false too when the build cannot load (a
 * plugin of it is gone). The signature is only the plugins' names: the loaders and test file
 * extensions a plugin exports are copied into the build, so a plugin of ours edited since (its
 * importLoader pointed elsewhere) needs a build too, which neither tap nor the signature notices.
 */
async function builtForConfig() {
  try {
    const { TapConfig } = await import('@tapjs/config')
    const built = await import('@tapjs/test')
    const config = await TapConfig.load()
    if (config.pluginSignature !== built.signature) return false
    const plugins = await Promise.all(config.pluginList.map((name) => import(name)))
    const importLoaders = plugins.flatMap((p) => p.importLoader ?? [])
    const loaders = plugins.flatMap((p) => p.loader ?? [])
    const sameSet = (a, b) => a.length === b.length && a.every((x) => b.includes(x))
    return (
      sameSet(importLoaders, built.importLoaders) &&
      sameSet(loaders, [...built.loaders, ...built.loaderFallbacks]) &&
      plugins.every((p) => (p.testFileExtensions ?? []).every((ext) => built.testFileExtensions.has(ext)))
    )
  } catch {
    return false
  }
}

if (!(await builtForConfig())) {
  process.stderr.write('tap is not built for the plugins .taprc names, as they are now: building it (tap build)\n')
  const build = spawnSync('npx', ['tap', 'build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (build.status !== 0) {
    process.stderr.write(`tap build failed (${build.error?.message ?? `exit ${build.status ?? build.signal}`})\n`)
    process.exit(1)
  }
}
