/**
 * The campaign's transition table (src/server/campaign/campaign-transitions.ts) over every phase and event,
 * against the conditions campaign.ts wrote before they became a table (copied below); then that the
 * table has every phase and every event exactly once, that every phase can be reached from a new
 * campaign's, and that a campaign done never moves again, nor a stopped one but for another cut command.
 */
import t from 'tap'
import { campaignPhases } from '../../../../src/protocol/messages.js'
import {
  campaignEvents,
  campaignStep,
  campaignTransitions,
  movesTo,
  type CampaignEvent,
  type CampaignPhase,
  type CampaignStep,
} from '../../../../src/server/campaign/campaign-transitions.js'

/** campaign.ts before the table: handle(), runAnnounced(), steady(), cut(), cutDone(), cameBack(), rebootTimedOut(), resume(). */
function before(phase: CampaignPhase, event: CampaignEvent): CampaignStep {
  const over = phase === 'done' || phase === 'stopped'
  const afterCut = phase === 'cutting' || phase === 'waiting-for-agent'
  switch (event) {
    case 'member-announced':
      return over ? { kind: 'ignore' } : { kind: 'stay' }
    case 'writer-announced':
      if (over) return { kind: 'ignore' }
      return phase === 'waiting-for-writer' || phase === 'waiting-to-cut' ? { kind: 'move', to: 'waiting-for-writer' } : { kind: 'refuse' }
    case 'steady':
      return phase === 'waiting-for-writer' ? { kind: 'move', to: 'waiting-to-cut' } : { kind: 'ignore' }
    case 'cut-due':
      return phase === 'waiting-to-cut' ? { kind: 'move', to: 'cutting' } : { kind: 'ignore' }
    case 'cut-ok':
      return phase === 'cutting' ? { kind: 'move', to: 'waiting-for-agent' } : { kind: 'stay' }
    case 'cut-failed':
      return phase === 'cutting' ? { kind: 'move', to: 'stopped' } : { kind: 'stay' }
    case 'verdict':
      return afterCut ? { kind: 'stay' } : { kind: 'ignore' }
    case 'verdicts-in':
      return afterCut ? { kind: 'move', to: 'waiting-for-writer' } : { kind: 'ignore' }
    case 'last-verdicts-in':
      return afterCut ? { kind: 'move', to: 'done' } : { kind: 'ignore' }
    case 'reboot-timeout':
      return afterCut ? { kind: 'move', to: 'stopped' } : { kind: 'ignore' }
    case 'restarted':
      return phase === 'cutting' ? { kind: 'move', to: 'waiting-for-agent' } : { kind: 'stay' }
    // Added with the table: a campaign stopped (by a failed cut) resumed with another cut command writes the cycle again.
    case 'cut-command-changed':
      return phase === 'stopped' ? { kind: 'move', to: 'waiting-for-writer' } : { kind: 'refuse' }
  }
}

t.test('every phase and event: what campaign.ts did before the table', async (t) => {
  let checked = 0
  for (const phase of campaignPhases) {
    for (const event of campaignEvents) {
      t.same(campaignStep(phase, event), before(phase, event), `${phase} + ${event}`)
      checked++
    }
  }
  t.equal(checked, 6 * 12)
})

t.test('the table has every phase and every event of each phase exactly once', async (t) => {
  t.same(Object.keys(campaignTransitions).sort(), [...campaignPhases].sort())
  for (const phase of campaignPhases) t.same(Object.keys(campaignTransitions[phase]).sort(), [...campaignEvents].sort(), phase)
  t.equal(new Set(campaignEvents).size, campaignEvents.length)
})

t.test("every phase is reached from a new campaign's; done is never left, stopped only for another cut command", async (t) => {
  const reached = new Set<CampaignPhase>(['waiting-for-writer'])
  for (let grew = true; grew; ) {
    grew = false
    for (const phase of [...reached]) {
      for (const event of campaignEvents) {
        const next = movesTo(phase, event)
        if (next !== undefined && !reached.has(next)) {
          reached.add(next)
          grew = true
        }
      }
    }
  }
  t.same([...reached].sort(), [...campaignPhases].sort())
  for (const phase of ['done', 'stopped'] as const)
    for (const event of campaignEvents)
      t.equal(
        movesTo(phase, event),
        phase === 'stopped' && event === 'cut-command-changed' ? 'waiting-for-writer' : undefined,
        `${phase} + ${event}`,
      )
})
