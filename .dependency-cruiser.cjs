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

/**
 * One rule per folder: it may import its own folder and the folders of lower layers, nothing else of
 * src/ (a folder of no layer included: it is caught wherever it is imported from).
 */
const layerRules = layers.flatMap((layer, rank) =>
  layer.flatMap((folder) => {
    const below = layers.slice(rank + 1).flat()
    return {
      name: `layer:${folder.replace(/\\\.ts\$|\$/g, '')}`,
      comment: `${folder} imports only its own folder and layers below it (ARCHITECTURE.md, "The layers")`,
      severity: 'error',
      from: { path: `^${folder}` },
      to: { path: '^src/', pathNot: [folder, ...below].map((f) => `^${f}`) },
    }
  }),
)

/** What code above src/native/ may import of it: none of these binds koffi (the rule below holds them to it). */
const nativeFace = '^src/native/(index|port|methods|registry|errors|sockaddr)\\.ts$'

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
      name: 'native-through-its-face',
      severity: 'error',
      comment: 'code above src/native/ imports only its face (index.ts chooses the port), never a module that binds koffi',
      from: { path: '^src/', pathNot: '^src/native/' },
      to: { path: '^src/native/', pathNot: nativeFace },
    },
    {
      name: 'native-face-binds-nothing',
      severity: 'error',
      comment: 'the face of src/native/ neither imports nor re-exports koffi: the binding stays below it',
      from: { path: nativeFace },
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
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'a src/ module nothing imports and that imports nothing: dead, or in a folder of no layer',
      from: { orphan: true, path: '^src/' },
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
