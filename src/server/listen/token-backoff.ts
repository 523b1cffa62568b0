/**
 * Wrong tokens from one address are slowed, so that --token cannot be guessed at network speed
 * (~14k guesses/s on loopback without this). Per source address (an IPv6 /64 counts as one address:
 * one machine or site gets a /64), after freeWrongTokens failures the hellos carrying a token are
 * answered one at a time, each reserving the next answer backoffMs(failures) later: 250 ms, doubling
 * up to maxBackoffMs. Every hello from such an address waits its turn, a good token too: answering a
 * good token at once would tell a guesser which guess was right without waiting for the others. A
 * hello given a turn counts as a wrong token at once (undone if its token is good), so that hellos
 * sent in parallel space their own turns as far apart as the same guesses sent one by one would. A
 * hello whose turn is further off than maxBackoffMs is refused at once ('limit') without looking at
 * its token, so an address holds at most a couple of waiting connections.
 *
 * Bounded memory: at most maxAddresses entries, least recently used forgotten first; an address with
 * no wrong token for forgetAfterMs starts afresh. Other addresses are never delayed.
 */
import { isIPv6 } from 'node:net'

export const freeWrongTokens = 3
export const firstBackoffMs = 250
export const defaultMaxBackoffMs = 5_000
export const maxBackoffAddresses = 16_384
const forgetAfterMs = 10 * 60_000

interface Entry {
  failures: number
  /** The earliest moment (performance.now()) the next hello from this address is answered. */
  nextAnswerMs: number
  lastFailureMs: number
}

/** presumed: the hello already counts as a wrong token (see turn()). */
export type HelloTurn =
  | { readonly kind: 'now'; readonly presumed: boolean }
  | { readonly kind: 'wait'; readonly waitMs: number; readonly presumed: true }
  | { readonly kind: 'refuse'; readonly retryAfterMs: number }

/** The wait between two answers to an address after `failures` wrong tokens. */
export function backoffMs(failures: number, maxMs: number): number {
  if (failures < freeWrongTokens) return 0
  return Math.min(maxMs, firstBackoffMs * 2 ** Math.min(failures - freeWrongTokens, 20))
}

/** 1.2.3.4 for 1.2.3.4 and ::ffff:1.2.3.4; the /64 of an IPv6 address ("2001:db8:1:2::/64"). */
export function addressGroup(peer: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(peer)
  if (mapped !== null) return mapped[1]!
  const address = peer.replace(/%.*$/, '')
  if (!isIPv6(address)) return peer
  const [head = '', tail] = address.split('::')
  const headParts = head === '' ? [] : head.split(':')
  const tailParts = tail === undefined || tail === '' ? [] : tail.split(':')
  // An embedded IPv4 address (::1.2.3.4) is two hextets; only the first four matter here.
  const width = (parts: string[]): number => parts.reduce((n, p) => n + (p.includes('.') ? 2 : 1), 0)
  const hextets = [...headParts, ...Array<string>(Math.max(0, 8 - width(headParts) - width(tailParts))).fill('0'), ...tailParts]
  return `${hextets
    .slice(0, 4)
    .map((h) => parseInt(h, 16).toString(16))
    .join(':')}::/64`
}

export class TokenBackoff {
  private readonly entries = new Map<string, Entry>()

  constructor(
    readonly maxBackoffMs = defaultMaxBackoffMs,
    readonly maxAddresses = maxBackoffAddresses,
  ) {}

  /**
   * When a hello carrying a token from peer may be answered; reserves that turn. A slowed address's
   * hello counts as a wrong token from now on (presumed): report its token with answered().
   */
  turn(peer: string, nowMs: number): HelloTurn {
    const entry = this.entry(addressGroup(peer), nowMs)
    if (entry === undefined || entry.failures < freeWrongTokens) return { kind: 'now', presumed: false }
    const atMs = Math.max(nowMs, entry.nextAnswerMs)
    if (atMs - nowMs > this.maxBackoffMs) return { kind: 'refuse', retryAfterMs: atMs - nowMs }
    entry.nextAnswerMs = atMs + backoffMs(entry.failures, this.maxBackoffMs)
    this.failed(peer, nowMs)
    return atMs === nowMs ? { kind: 'now', presumed: true } : { kind: 'wait', waitMs: atMs - nowMs, presumed: true }
  }

  /** The token of a hello was checked: a wrong one counts (once), a good one undoes its presumed failure. */
  answered(peer: string, turn: HelloTurn, good: boolean, nowMs: number): void {
    const presumed = turn.kind !== 'refuse' && turn.presumed
    if (!good && !presumed) this.failed(peer, nowMs)
    if (good && presumed) {
      const entry = this.entries.get(addressGroup(peer))
      if (entry !== undefined && entry.failures > 0) entry.failures--
    }
  }

  /** A wrong token from peer. */
  failed(peer: string, nowMs: number): void {
    const key = addressGroup(peer)
    const entry = this.entry(key, nowMs) ?? { failures: 0, nextAnswerMs: 0, lastFailureMs: nowMs }
    entry.failures++
    entry.lastFailureMs = nowMs
    this.entries.delete(key) // most recently used last
    this.entries.set(key, entry)
    if (this.entries.size > this.maxAddresses) this.entries.delete(this.entries.keys().next().value!)
  }

  /** Addresses remembered (for tests of the bound). */
  size(): number {
    return this.entries.size
  }

  private entry(key: string, nowMs: number): Entry | undefined {
    const entry = this.entries.get(key)
    if (entry !== undefined && nowMs - entry.lastFailureMs > forgetAfterMs && nowMs >= entry.nextAnswerMs) {
      this.entries.delete(key)
      return undefined
    }
    return entry
  }
}
