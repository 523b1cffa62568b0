/**
 * A files run's verify excuses the oldest kept record (A + 1 - K) when it is absent: step A + 1 may
 * have deleted it before its ack reached the listener. But a run the writer ended itself (--duration,
 * a signal: reasons 'duration' and 'interrupted') stopped between steps after acking every one it
 * completed, and sent its end after those acks: no step past A ran, so rec-(A + 1 - K) gone is a loss.
 * A run that failed mid-step ('error') or vanished keeps the excuse.
 */
import t from 'tap'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { craftFilesMeta, craftRun, listenerWith, range, writeFilesRun } from '../fixtures/crafted-run.js'
import { runInProcess, tempDir } from '../fixtures/cli.js'

const keep = 10
const acked = 25

const judged = async (server: string, dir: string) => {
  const result = await runInProcess(['verify', '--server', server, '--file', dir, '--json'])
  return { code: result.code, run: JSON.parse(result.stdout).runs[0] }
}

const cases = [
  ['duration', 1, 'fail'],
  ['interrupted', 1, 'fail'],
  ['error', 0, 'pass'],
  ['vanished', 0, 'pass'],
  [undefined, 0, 'pass'],
] as const

for (const [i, [reason, code, verdict]] of cases.entries()) {
  t.test(`the oldest kept record absent, the run ${reason === undefined ? 'never ended' : `ended: ${reason}`}: ${verdict}`, async (t) => {
    const dir = join(tempDir(t), 'run')
    const meta = craftFilesMeta(`e30000000000000${i + 1}`, dir, keep)
    writeFilesRun(meta, range(16, 25))
    rmSync(join(dir, 'rec-16'))
    const end = reason === undefined ? {} : { end: { reason, atMs: meta.createdMs + 5000 } }
    const server = await listenerWith(t, [craftRun(meta, acked, end)])
    const judgedRun = await judged(server, dir)
    t.equal(judgedRun.code, code)
    t.match(judgedRun.run, {
      verdict,
      lost: code,
      intact: 9,
      superseded: 15 + (1 - code),
      files: { deletedUnacknowledged: 1 - code },
    })
  })
}
