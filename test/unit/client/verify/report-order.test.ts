/** verify lists a group's runs by method, then in job order, whatever order the listener answered in. */
import t from 'tap'
import { inReportOrder } from '../../../../src/client/verify/run-lookup.js'

t.test('by method, then jobs by number (job2 before job10), stable for equal keys', async (t) => {
  const run = (method: string, path: string, id: string) => ({ meta: { method, path }, id })
  const answered = [
    run('none', '/d/data.none.job10', 'a'),
    run('fdatasync', '/d/data.fdatasync.job10', 'b'),
    run('fdatasync', '/d/data.fdatasync.job2', 'c'),
    run('none', '/d/data.none.job1', 'd'),
    run('fdatasync', '/d/data.fdatasync.job1', 'e'),
    run('none', '/d/data.none.job2', 'f'),
  ]
  t.same(
    inReportOrder([...answered]).map((r) => r.id),
    ['e', 'c', 'b', 'd', 'f', 'a'],
  )
  const jobs = [11, 3, 10, 1, 2].map((k) => run('fsync', `/d/x y.job${k}`, String(k)))
  t.same(
    inReportOrder(jobs).map((r) => r.id),
    ['1', '2', '3', '10', '11'],
  )
})
