/**
 * How the listener refuses damaged run files. A run in its catalog (a directory closed cleanly): the
 * listener starts at once, its background check names the damage in a warning, and the damaged run's
 * queries are refused with exit code 3 and the message. A run not in the catalog (none, or deleted)
 * is replayed at start: Listener.start rejects with exit code 3 and the message.
 */
import type { Test } from 'tap'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { Listener } from '../../src/server/listener.js'

export async function listenerRefuses(t: Test, dir: string, message: string | RegExp): Promise<void> {
  const catalogued = existsSync(join(dir, 'catalog.msgpack'))
  const warnings: string[] = []
  const onEvent = (event: { kind: string; message?: string }): void => void (event.kind === 'warning' && warnings.push(event.message ?? ''))
  const outcome = await Listener.start({ host: '127.0.0.1', port: 0, dir, onEvent }).catch((error: unknown) => error)
  if (!(outcome instanceof Listener)) {
    t.notOk(catalogued, 'only a run outside the catalog stops the start')
    t.match(outcome, { exitCode: 3, message }, 'the listener refuses to start')
    return
  }
  try {
    t.ok(catalogued, 'the listener started from its catalog')
    await outcome.store.startScrub()
    const named = warnings.filter((w) => (typeof message === 'string' ? w.includes(message) : message.test(w)))
    t.ok(named.length > 0, `a warning names the damage (${warnings.join(' | ')})`)
    const refusals: unknown[] = []
    for (const summary of outcome.store.summaries()) {
      await outcome.store.queryAsync(summary.host, summary.path, summary.runId).catch((error: unknown) => refusals.push(error))
    }
    t.ok(refusals.length > 0, "the damaged run's queries are refused")
    for (const refusal of refusals) t.match(refusal, { exitCode: 3, message }, 'refused naming the damage')
  } finally {
    await outcome.close()
  }
}
