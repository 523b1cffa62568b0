/**
 * The campaign's transitions, as a table (STYLE.md principle 12): for each phase and each event, the
 * next phase, or that the event is taken with the phase unchanged, ignored, or refused with a line in
 * the log. campaign.ts consults it at each event; what it does besides (the record it writes, the
 * timers it arms, the guards on the event's cycle and group) stays there.
 *
 *   member-announced   a run of the cycle's group: recorded as one of the cycle's runs
 *   writer-announced   a run of another group tagged with this cycle: the agent restarted its writer,
 *                      and the cycle follows the new group (once the old writer is gone)
 *   steady             the cycle's writer is steady: the cut is planned
 *   cut-due            the planned cut moment came
 *   cut-ok, cut-failed the cut command exited 0, or did not (or could not start, or was killed)
 *   verdict            a verdict for one of the cycle's runs: counted
 *   verdicts-in        every run of the cycle has a verdict, and cycles remain: the next cycle
 *   last-verdicts-in   the same in the last cycle: done
 *   reboot-timeout     no agent came back with the verdicts within the reboot timeout
 *   restarted          the listener restarted with the campaign in this phase
 *   cut-command-changed the listener restarted with another --cut-command (campaign-file-io.ts lets
 *                      that through only for a campaign stopped by a failed cut): the cycle is
 *                      written again, from the agent's writer on
 */
import type { CampaignState } from '../../protocol/messages.js'

export type CampaignPhase = CampaignState['phase']
export const campaignEvents = [
  'member-announced',
  'writer-announced',
  'steady',
  'cut-due',
  'cut-ok',
  'cut-failed',
  'verdict',
  'verdicts-in',
  'last-verdicts-in',
  'reboot-timeout',
  'restarted',
  'cut-command-changed',
] as const
export type CampaignEvent = (typeof campaignEvents)[number]

/** move: to the next phase; stay: taken, the phase unchanged; ignore: dropped silently; refuse: dropped with a line in the log. */
export type CampaignStep =
  | { readonly kind: 'move'; readonly to: CampaignPhase }
  | { readonly kind: 'stay' }
  | { readonly kind: 'ignore' }
  | { readonly kind: 'refuse' }

const to = (phase: CampaignPhase): CampaignStep => ({ kind: 'move', to: phase })
const stay: CampaignStep = { kind: 'stay' }
const ignore: CampaignStep = { kind: 'ignore' }
const refuse: CampaignStep = { kind: 'refuse' }

/** A campaign that is done or stopped takes nothing more, but a cut command still running records its result. */
const over: Readonly<Record<CampaignEvent, CampaignStep>> = {
  'member-announced': ignore,
  'writer-announced': ignore,
  steady: ignore,
  'cut-due': ignore,
  'cut-ok': stay,
  'cut-failed': stay,
  verdict: ignore,
  'verdicts-in': ignore,
  'last-verdicts-in': ignore,
  'reboot-timeout': ignore,
  restarted: stay,
  'cut-command-changed': refuse,
}

export const campaignTransitions: Readonly<Record<CampaignPhase, Readonly<Record<CampaignEvent, CampaignStep>>>> = {
  'waiting-for-writer': {
    'member-announced': stay,
    'writer-announced': to('waiting-for-writer'),
    steady: to('waiting-to-cut'),
    'cut-due': ignore,
    // An earlier cycle's command finishing late (the agent came back first): its result is recorded.
    'cut-ok': stay,
    'cut-failed': stay,
    verdict: ignore,
    'verdicts-in': ignore,
    'last-verdicts-in': ignore,
    'reboot-timeout': ignore,
    restarted: stay,
    'cut-command-changed': refuse,
  },
  'waiting-to-cut': {
    'member-announced': stay,
    // The cut waits for the new writer to be steady.
    'writer-announced': to('waiting-for-writer'),
    steady: ignore,
    'cut-due': to('cutting'),
    'cut-ok': stay,
    'cut-failed': stay,
    verdict: ignore,
    'verdicts-in': ignore,
    'last-verdicts-in': ignore,
    'reboot-timeout': ignore,
    restarted: stay,
    'cut-command-changed': refuse,
  },
  cutting: {
    'member-announced': stay,
    // The agent starts a cycle's writer only after it reported the verdicts: a writer now is not the cycle's.
    'writer-announced': refuse,
    steady: ignore,
    'cut-due': ignore,
    'cut-ok': to('waiting-for-agent'),
    'cut-failed': to('stopped'),
    // A fast power cycle: the agent may be back before the command returned.
    verdict: stay,
    'verdicts-in': to('waiting-for-writer'),
    'last-verdicts-in': to('done'),
    'reboot-timeout': to('stopped'),
    // The command may have run (the cut moment was on disk before it started): never run it twice.
    restarted: to('waiting-for-agent'),
    'cut-command-changed': refuse,
  },
  'waiting-for-agent': {
    'member-announced': stay,
    'writer-announced': refuse,
    steady: ignore,
    'cut-due': ignore,
    'cut-ok': stay,
    'cut-failed': stay,
    verdict: stay,
    'verdicts-in': to('waiting-for-writer'),
    'last-verdicts-in': to('done'),
    'reboot-timeout': to('stopped'),
    restarted: stay,
    'cut-command-changed': refuse,
  },
  done: over,
  // Stopped by a failed cut, resumed with another cut command: the cycle is written again.
  stopped: { ...over, 'cut-command-changed': to('waiting-for-writer') },
}

export function campaignStep(phase: CampaignPhase, event: CampaignEvent): CampaignStep {
  return campaignTransitions[phase][event]
}

/** The phase the event moves to from this phase, or undefined when it moves nowhere. */
export function movesTo(phase: CampaignPhase, event: CampaignEvent): CampaignPhase | undefined {
  const step = campaignStep(phase, event)
  return step.kind === 'move' ? step.to : undefined
}

/** Whether the event is taken in this phase (it moves, or it is acted on in place). */
export function takes(phase: CampaignPhase, event: CampaignEvent): boolean {
  const kind = campaignStep(phase, event).kind
  return kind === 'move' || kind === 'stay'
}
