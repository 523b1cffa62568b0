/**
 * `plugcheck methods`: this platform's sync methods, available or not and why, the calls each makes,
 * what each promises here, and what --direct does. Write, bench and verify decide from the same table.
 */
import { z } from 'zod'
import { directorySyncs, directorySyncText, methodNames } from '../native/methods.js'
import { methodRow } from '../native/registry.js'
import { nativePort } from '../native/index.js'
import { exitCodes } from '../base/errors.js'
import type { Io } from '../base/io.js'

/** The JSON document (`methods --json`), validated before it is printed. */
export const methodsReportSchema = z.object({
  platform: z.string(),
  name: z.string(),
  family: z.enum(['posix', 'windows']),
  methods: z.array(
    z.object({
      name: z.enum(methodNames),
      available: z.boolean(),
      reason: z.string().nullable(),
      calls: z.string(),
      caveat: z.string().nullable(),
      durable: z.boolean(),
      /** What `write --pattern files` calls on the directory after each record file's sync (methods.ts directorySyncs). */
      directorySync: z.string(),
    }),
  ),
  direct: z.object({ applies: z.boolean(), how: z.string().nullable(), reason: z.string().nullable() }),
  notes: z.array(z.string()),
})
export type MethodsReport = z.infer<typeof methodsReportSchema>

export function methodsReport(): MethodsReport {
  const table = nativePort().table()
  return methodsReportSchema.parse({
    platform: table.platform,
    name: table.name,
    family: table.family,
    // methodRow applies PLUGCHECK_DISABLE_METHODS, as write and bench do.
    methods: table.methods.map((m) => {
      const row = methodRow(m.name)
      return {
        name: row.name,
        available: row.available,
        reason: row.reason ?? null,
        calls: row.calls,
        caveat: row.caveat ?? null,
        durable: row.durable,
        directorySync: directorySyncText[directorySyncs[table.family][row.name]],
      }
    }),
    direct: table.direct.applies
      ? { applies: true, how: table.direct.how, reason: null }
      : { applies: false, how: null, reason: table.direct.reason },
    notes: [...table.notes],
  })
}

export function renderMethods(report: MethodsReport): string {
  const width = Math.max(...report.methods.map((m) => m.name.length))
  const lines = [`Sync methods on ${report.name} (${report.family} port):`, '']
  for (const m of report.methods) {
    const head = `  ${m.name.padEnd(width)}  ${m.available ? 'yes' : 'n/a'}  `
    lines.push(head + (m.available ? m.calls : m.reason))
    if (m.available && m.caveat !== null) lines.push(`  ${' '.repeat(width)}       note: ${m.caveat}`)
  }
  lines.push('', '--pattern files: after each record file is synced (as above) and renamed, the directory gets:')
  for (const m of report.methods.filter((row) => row.available)) lines.push(`  ${m.name.padEnd(width)}  ${m.directorySync}`)
  lines.push('', `--direct: ${report.direct.applies ? report.direct.how : `n/a: ${report.direct.reason}`}`)
  for (const note of report.notes) lines.push(`note: ${note}`)
  return `${lines.join('\n')}\n`
}

export function runMethods(options: { readonly json: boolean }, io: Pick<Io, 'out'>): number {
  const report = methodsReport()
  io.out(options.json ? `${JSON.stringify(report, null, 2)}\n` : renderMethods(report))
  return exitCodes.ok
}
