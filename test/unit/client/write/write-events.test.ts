/**
 * The write's events as data: which output a write gets, the plain announced line, and the JSON
 * events (every one a single line, one object; latencies not yet measured are null); the summaries
 * of write --jobs's jobs read back for the group's one summary.
 */
import t, { type Test } from 'tap'
import type { RunMeta } from '../../../../src/record/format.js'
import {
  announcedEvent,
  announcedLine,
  jobOf,
  patternText,
  progressEvent,
  steadyEvent,
  summaryEvent,
  summaryRunsOf,
  writeOutputOf,
  type RunSummary,
} from '../../../../src/client/write/write-events.js'
import type { WriteProgress } from '../../../../src/client/write/write-options.js'

const meta: RunMeta = {
  runId: '0123456789abcdef',
  groupId: 'fedcba9876543210',
  method: 'fdatasync',
  direct: false,
  pattern: 'append',
  recordSizeBytes: 8192,
  slotCount: 100,
  host: 'box',
  path: '/mnt/t/p.dat.fdatasync',
  requestedPath: '/mnt/t/p.dat',
  createdMs: Date.now(),
  member: { jobs: 1, job: 1, methods: ['fdatasync', 'none'] },
}
const inJob: RunMeta = { ...meta, direct: true, path: '/mnt/t/p.dat.fdatasync.job2', member: { jobs: 3, job: 2, methods: ['fdatasync'] } }

const progress: WriteProgress = {
  elapsedS: 5.0004,
  written: 1000,
  recorded: 990,
  syncP50Us: 350.4,
  syncP99Us: 9000,
  waitingUnrecorded: undefined,
  steady: true,
}

/** One JSON line: a single line ending in a newline, parsed. */
function oneLine(t: Test, text: string): Record<string, unknown> {
  t.ok(text.endsWith('\n') && text.indexOf('\n') === text.length - 1, 'one line')
  return JSON.parse(text) as Record<string, unknown>
}

t.test('the output: --json wins, else a terminal gets the status line, else plain lines', async (t) => {
  t.equal(writeOutputOf(true, true), 'json')
  t.equal(writeOutputOf(true, false), 'json')
  t.equal(writeOutputOf(false, true), 'terminal')
  t.equal(writeOutputOf(undefined, true), 'terminal')
  t.equal(writeOutputOf(false, false), 'lines')
  t.equal(writeOutputOf(undefined, false), 'lines')
})

t.test('announced: the plain line and the event name the run, its method, file and listener', async (t) => {
  t.equal(
    announcedLine(meta, 'l:5400'),
    'announced: run 0123456789abcdef (fdatasync, append) of /mnt/t/p.dat.fdatasync at the listener l:5400\n',
  )
  t.equal(
    announcedLine(inJob, '[::1]:5400'),
    'announced: run 0123456789abcdef (fdatasync --direct, append, job 2) of /mnt/t/p.dat.fdatasync.job2 at the listener [::1]:5400\n',
  )
  t.equal(jobOf(meta), null, 'one job: no job number')
  t.equal(jobOf(inJob), 2)
  t.equal(jobOf({ member: undefined }), null, "an older run's metadata has no member")
  const event = oneLine(t, announcedEvent(inJob, 'l:5400', "plugcheck verify --server l:5400 --file '/mnt/t/p.dat'"))
  t.match(event, {
    event: 'announced',
    runId: meta.runId,
    groupId: meta.groupId,
    method: 'fdatasync',
    direct: true,
    pattern: 'append',
    recordSizeBytes: 8192,
    path: '/mnt/t/p.dat.fdatasync.job2',
    file: '/mnt/t/p.dat',
    job: 2,
    listener: 'l:5400',
    verifyCommand: "plugcheck verify --server l:5400 --file '/mnt/t/p.dat'",
  })
  t.equal(event.files, null, 'a data file: no files settings')
  t.type(event.timeMs, 'number')
  const files = oneLine(
    t,
    announcedEvent({ ...meta, pattern: 'files', slotCount: 5, files: { dirSync: false, publish: 'link' } }, 'l:5400', 'x'),
  )
  t.same(files.files, { dirSync: false, publish: 'link', keptFiles: 5 })
  t.equal(files.pattern, 'files')
})

t.test('steady and progress: the counts, the rate, latencies in whole microseconds or null', async (t) => {
  const steady = oneLine(t, steadyEvent(progress, null))
  t.match(steady, { event: 'steady', elapsedS: 5, acknowledged: 1000, recorded: 990, ratePerS: 200, syncP50Us: 350, syncP99Us: 9000 })
  t.equal(steady.jobs, null)
  t.equal(steady.waitingUnrecorded, null)
  const early = oneLine(
    t,
    progressEvent({ ...progress, syncP50Us: Number.NaN, syncP99Us: Number.NaN, waitingUnrecorded: 7, steady: false }, 4),
  )
  t.match(early, { event: 'progress', jobs: 4, waitingUnrecorded: 7, steady: false })
  t.equal(early.syncP50Us, null, 'no sync measured yet: null, never NaN (JSON has none)')
  t.equal(early.syncP99Us, null)
})

t.test("summary: the runs, their totals, the verify command; a group's summary reads its jobs' back", async (t) => {
  const run = (job: number, acknowledged: number): RunSummary => ({
    runId: `00000000000000${job}${job}`,
    method: 'fdatasync',
    direct: false,
    pattern: 'append',
    recordSizeBytes: 8192,
    path: `/p.job${job}`,
    job,
    end: 'duration',
    acknowledged,
    syncedNotAcknowledged: 0,
    recorded: acknowledged - 1,
    syncP50Us: 10,
    syncP99Us: 20,
    syncMaxUs: 30,
  })
  const one = summaryEvent([run(1, 10)], 'V')
  const two = summaryEvent([run(2, 5)], 'V')
  t.match(oneLine(t, one), { event: 'summary', acknowledged: 10, recorded: 9, verifyCommand: 'V', runs: [run(1, 10)] })
  const text = `${one}${two}${progressEvent(progress, null)}`
  const runs = summaryRunsOf(text)
  t.same(runs, [run(1, 10), run(2, 5)], 'every summary event read, in order; other events ignored')
  t.match(oneLine(t, summaryEvent(runs, 'V')), { acknowledged: 15, recorded: 13 })
  t.same(summaryRunsOf(''), [], 'a job that printed nothing')
})

t.test('a files run is said with its publish way, the directory sync this platform makes for its method, and the files kept', async (t) => {
  const files = (method: RunMeta['method'], dirSync: boolean, publish: 'rename' | 'link'): RunMeta => ({
    ...meta,
    method,
    pattern: 'files',
    slotCount: 32_767,
    files: { dirSync, publish },
  })
  t.equal(patternText(meta), 'append')
  t.equal(patternText({ ...meta, pattern: 'overwrite' }), 'overwrite')
  const posix = process.platform !== 'win32'
  t.equal(
    patternText(files('fdatasync', true, 'rename')),
    posix ? 'files (rename, fdatasync of the directory, 32,767 kept)' : 'files (rename, no directory sync (Windows cannot), 32,767 kept)',
  )
  t.equal(patternText(files('none', true, 'link')), 'files (link, no directory sync (none), 32,767 kept)')
  t.equal(patternText(files('fsync', false, 'link')), 'files (link, no directory sync, 32,767 kept)')
  t.match(
    announcedLine(files('fsync', true, 'rename'), '127.0.0.1:5400'),
    /^announced: run 0123456789abcdef \(fsync, files \(rename, .*, 32,767 kept\)\) of /,
  )
})
