/**
 * A worker thread running a module of plugcheck's that sits beside the caller's module, under the
 * same name with the caller's extension: the sources (.ts), dist/'s chunks (.js) and the single
 * executable's unpacked bundle (.mjs) all lay the entries out that way (scripts/build.ts,
 * scripts/build-exe.ts). Run from the TypeScript sources, the worker registers tsx itself first:
 * module hooks registered in the main thread do not reach workers.
 */
import { extname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

export function startModuleWorker(callerUrl: string, name: string, workerData: unknown): Worker {
  const entry = new URL(`./${name}${extname(fileURLToPath(callerUrl))}`, callerUrl)
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, { workerData })
  const tsx = import.meta.resolve('tsx/esm/api')
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}) })`
  return new Worker(boot, { eval: true, workerData })
}
