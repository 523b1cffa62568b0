/**
 * watchCampaign (agent.ts): while the agent writes a cycle it asks the listener's campaign, at an
 * interval, whether it stopped; a stopped campaign of its name gives the writer its stop reason, any
 * other answer (another phase, another campaign, none, a failed query) changes nothing, and release
 * ends the asking.
 */
import t from 'tap'
import { watchCampaign } from '../../../../src/client/agent/agent.js'
import type { CampaignState } from '../../../../src/protocol/messages.js'
import { waitFor } from '../../../fixtures/cli.js'

const state = (over: Partial<CampaignState>): CampaignState => ({ name: 'c', cycles: 3, cycle: 2, phase: 'waiting-to-cut', ...over })

t.test('a stopped campaign of its name stops the writer, with the campaign’s reason; nothing else does', async (t) => {
  const answers: Array<CampaignState | null | Error> = [
    state({ phase: 'waiting-to-cut' }),
    new Error('listener unreachable'),
    null,
    state({ name: 'other', phase: 'stopped', detail: 'not ours' }),
    state({ phase: 'cutting' }),
    state({ phase: 'stopped', detail: 'cycle 2: the cut command\nexited 1' }),
  ]
  let asked = 0
  const watch = watchCampaign(
    async () => {
      const answer = answers[Math.min(asked++, answers.length - 1)]!
      if (answer instanceof Error) throw answer
      return answer
    },
    'c',
    5,
  )
  t.teardown(watch.release)
  t.equal(watch.stopReason(), undefined, 'nothing before the first answer')
  await waitFor('the stop reason', () => watch.stopReason() !== undefined, 5000, 5)
  t.equal(asked, answers.length, 'asked until the campaign stopped')
  t.equal(watch.stopReason(), 'campaign c stopped (cycle 2: the cut command exited 1)', 'the reason, on one line')
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(asked, answers.length, 'not asked again once stopped')
})

t.test('a stopped campaign without a detail names its cycle; release ends the asking', async (t) => {
  const stopped = watchCampaign(async () => state({ phase: 'stopped' }), 'c', 5)
  await waitFor('the stop reason', () => stopped.stopReason() !== undefined, 5000, 5)
  stopped.release()
  t.equal(stopped.stopReason(), 'campaign c stopped in cycle 2')

  let running = 0
  const watch = watchCampaign(
    async () => {
      running++
      return state({ phase: 'waiting-for-writer' })
    },
    'c',
    5,
  )
  await waitFor('a few answers', () => running >= 3, 5000, 5)
  watch.release()
  const after = running
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.ok(running <= after + 1, `no more asking after release (${running - after} in flight)`)
  t.equal(watch.stopReason(), undefined, 'a running campaign never stops the writer')
})
