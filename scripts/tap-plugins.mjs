// Builds tap for the plugin set .taprc names, before a run, when the installed build differs.
//
// tap compiles its Test class for a set of plugins. After `npm ci` it is built for tap's defaults,
// which load TypeScript through ts-node; .taprc swaps that for tsx. tap notices the difference and
// rebuilds itself, but only inside a run that has already chosen each test process's loaders from the
// old build: every file of that first run goes through ts-node (about twice the suite's CPU). Run as
// `npm test`'s pretest, this builds first, so every run loads tests through tsx. Plain JavaScript:
// it runs before anything is compiled. Prints nothing when the build is current.
import { spawnSync } from 'node:child_process'
import { TapConfig } from '@tapjs/config'
import { signature } from '@tapjs/test'

const config = await TapConfig.load()
if (config.pluginSignature !== signature) {
  process.stderr.write('tap is built for other plugins than .taprc names: building it for them (tap build)\n')
  const build = spawnSync('npx', ['tap', 'build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (build.status !== 0) {
    process.stderr.write(`tap build failed (${build.error?.message ?? `exit ${build.status ?? build.signal}`})\n`)
    process.exit(1)
  }
}
