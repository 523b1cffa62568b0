/**
 * The layering of src/ (ARCHITECTURE.md, "The layers"), checked by `npm run check:layers` and by CI.
 * A module may import its own folder and any folder of a lower layer; never a higher layer, never
 * another folder of its own layer, never a cycle. Only src/native/ calls the OS through koffi.
 */
const layers = [
  ['src/bin\\.ts$'],
  ['src/cli/'],
  ['src/client/agent/'],
  ['src/client/write/', 'src/server/listen/', 'src/report/', 'src/bench/'],
  ['src/client/verify/', 'src/server/campaign/'],
  ['src/client/[^/]+\\.ts$', 'src/store/', 'src/exe/'],
  ['src/protocol/'],
  ['src/env/', 'src/record/'],
  ['src/base/'],
  ['src/native/'],
]

/** One rule per folder: it may not import a folder of its own layer or of any layer above. */
const layerRules = layers.flatMap((layer, rank) =>
  layer.flatMap((folder) => {
    const notBelow = layers.slice(0, rank + 1).flat().filter((other) => other !== folder)
    if (notBelow.length === 0) return []
    return {
      name: `layer:${folder.replace(/\\\.ts\$|\$/g, '')}`,
      comment: `${folder} imports only its own folder and layers below it (ARCHITECTURE.md, "The layers")`,
      severity: 'error',
      from: { path: `^${folder}` },
      to: { path: notBelow.map((f) => `^${f}`) },
    }
  }),
)

module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'modules import each other', from: {}, to: { circular: true } },
    {
      name: 'platform-calls-in-native',
      severity: 'error',
      comment: 'only src/native/ binds the C library, kernel32 or ntdll',
      from: { path: '^src/', pathNot: '^src/native/' },
      to: { path: 'node_modules/koffi/' },
    },
    {
      name: 'src-not-from-test',
      severity: 'error',
      comment: 'the product never imports its tests, benchmarks or scripts',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts)/' },
    },
    {
      name: 'every-module-placed',
      severity: 'error',
      comment: 'a src/ module outside every layer of this file: give its folder a layer',
      from: { path: '^src/', pathNot: layers.flat().map((f) => `^${f}`) },
      to: {},
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
}
