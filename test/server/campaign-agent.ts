/**
 * Test helpers for campaigns: a fake agent over the raw protocol (a writer that announces a tagged run,
 * acks and reports steady; a verifier that reports the verdict after the "reboot") and a cut command
 * that is a shell script appending one line to a file per run.
 */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { campaignFileSchema, type CampaignFile } from '../../src/server/campaign-file.js'
import { campaignFilePath } from '../../src/server/campaign.js'
import type { StoredVerdict } from '../../src/protocol/messages.js'
import { waitFor } from '../fixtures/cli.js'
import { Peer, runMeta } from './peer.js'

export const ackedRecords = 10

export function passVerdict(acked = ackedRecords): StoredVerdict {
  return {
    verdict: 'pass',
    acked,
    intact: acked,
    lost: 0,
    torn: 0,
    corrupt: 0,
    lossWindowMs: null,
    reordered: false,
    lostRanges: [],
    rebootedSinceWrite: true,
    summary: `PASS: ${acked} acknowledged records intact`,
    bootId: null,
    fingerprint: null,
    atMs: Date.now(),
  }
}

/** A cut command: appends a line to <dir>/cuts.log (then exits with exitCode, after sleepS seconds). */
export function cutScript(dir: string, exitCode = 0, sleepS = 0): { command: string; count: () => number; log: string } {
  const log = join(dir, 'cuts.log')
  const script = join(dir, `cut-${exitCode}-${sleepS}.sh`)
  writeFileSync(script, `#!/bin/sh\necho "cut at $(date +%s%N)" >> '${log}'\necho "power cycle requested"\n${sleepS > 0 ? `sleep ${sleepS}\n` : ''}exit ${exitCode}\n`)
  chmodSync(script, 0o755)
  return {
    command: `'${script}'`,
    log,
    count: () => {
      try {
        return readFileSync(log, 'utf8').split('\n').filter((l) => l !== '').length
      } catch {
        return 0
      }
    },
  }
}

/** The campaign file as the listener left it on disk (undefined while there is none). */
export function readCampaign(dir: string, name: string): CampaignFile | undefined {
  try {
    return campaignFileSchema.parse(JSON.parse(readFileSync(campaignFilePath(dir, name), 'utf8')))
  } catch {
    return undefined
  }
}

export async function waitForPhase(dir: string, name: string, phases: readonly string[], what = '', timeoutMs = 20_000): Promise<CampaignFile> {
  let file: CampaignFile | undefined
  await waitFor(`campaign ${name} in ${phases.join(' or ')} ${what}(now ${file?.phase} in cycle ${file?.cycle})`, () => {
    file = readCampaign(dir, name)
    return file !== undefined && phases.includes(file.phase)
  }, timeoutMs)
  return file!
}

/** The agent's writer of one cycle: announces a run tagged with the campaign, acks, reports steady. */
export async function startCycleWriter(port: number, name: string, cycle: number): Promise<{ writer: Peer; runId: string }> {
  const runId = (0x1000 + cycle).toString(16).padStart(16, '0')
  const writer = await Peer.open(port)
  writer.send({ type: 'hello', protocol: 3, role: 'writer' })
  writer.send({ type: 'run', meta: runMeta(runId, { host: 'box', path: '/data/plugcheck.dat', requestedPath: '/data/plugcheck.dat' }), campaign: { name, cycle } })
  await writer.next('run-ok')
  writer.send({ type: 'ack', runId, fromSeq: 1, toSeq: ackedRecords })
  await writer.next('recorded')
  writer.send({ type: 'steady', runId })
  return { writer, runId }
}

/** The agent after the reboot: reports the verdict of the cycle's run. */
export async function reportVerdict(port: number, runId: string): Promise<void> {
  const verifier = await Peer.open(port)
  try {
    verifier.send({ type: 'hello', protocol: 3, role: 'verifier' })
    await verifier.next('welcome')
    verifier.send({ type: 'verdict', runId, result: passVerdict() })
    await verifier.next('verdict-ok')
  } finally {
    verifier.close()
  }
}
