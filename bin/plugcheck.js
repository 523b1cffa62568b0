#!/usr/bin/env node
// Loads the TypeScript sources through tsx, so a user never runs a compiler by hand; `npm run build`
// compiles the same entry point (src/bin.ts) to dist/bin.js for node alone.
import { register } from 'tsx/esm/api'

register()
await import('../src/bin.ts')
