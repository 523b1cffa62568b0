/**
 * Wrong tokens from one address are slowed: after a few, that address's hellos are answered one at a
 * time with a growing wait (capped), and one whose turn is further off is refused at once without a
 * look at its token. Other addresses are never delayed; a good token from the slowed address still
 * gets in, after its wait. Memory is bounded (an LRU of addresses).
 */
import t from 'tap'
import { performance } from 'node:perf_hooks'
import { Listener } from '../../../../src/server/listen/listener.js'
import { TokenBackoff, addressGroup, backoffMs, freeWrongTokens } from '../../../../src/server/listen/token-backoff.js'
import { tempDir } from '../../../fixtures/cli.js'
import { Peer, runIdOf, runMeta } from '../../../fixtures/peer.js'

t.test('the schedule, the address groups and the bound on memory', async (t) => {
  t.same(
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 40].map((n) => backoffMs(n, 5000)),
    [0, 0, 0, 250, 500, 1000, 2000, 4000, 5000, 5000, 5000],
  )
  t.equal(addressGroup('::ffff:10.1.2.3'), '10.1.2.3', 'an IPv4 peer of a dual-stack socket is its IPv4 address')
  t.equal(addressGroup('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
  t.equal(addressGroup('2001:db8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64', 'one /64, one address')
  t.equal(addressGroup('fe80::1%eth0'), 'fe80:0:0:0::/64')
  const backoff = new TokenBackoff(5000, 100)
  for (let i = 0; i < 1000; i++) backoff.failed(`10.0.${i >> 8}.${i & 255}`, 0)
  t.equal(backoff.size(), 100, 'at most maxAddresses remembered')
  // Turns from one address are spaced; other addresses answered at once.
  const b = new TokenBackoff(5000)
  for (let i = 0; i < freeWrongTokens; i++) {
    const turn = b.turn('10.9.9.9', 0)
    t.same(turn, { kind: 'now', presumed: false })
    b.answered('10.9.9.9', turn, false, 0)
  }
  t.same(b.turn('10.9.9.9', 0), { kind: 'now', presumed: true }, 'the first slowed answer')
  // Hellos sent at once wait their turns, each counted as a wrong guess: as far apart as guesses one by one.
  const waits: number[] = []
  for (let turn = b.turn('10.9.9.9', 0); turn.kind === 'wait' && waits.length < 100; turn = b.turn('10.9.9.9', 0)) waits.push(turn.waitMs)
  t.same(waits, [250, 750, 1750, 3750], 'turns 250, 500, 1000, 2000 ms apart, none further off than 5 s')
  t.same(b.turn('10.9.9.9', 0), { kind: 'refuse', retryAfterMs: 7750 }, 'past the cap: refused at once, not counted')
  // A good token undoes its presumed failure: the next wait does not grow for it.
  const c = new TokenBackoff(5000)
  for (let i = 0; i < freeWrongTokens; i++) c.failed('10.8.8.8', 0)
  const good = c.turn('10.8.8.8', 0)
  c.answered('10.8.8.8', good, true, 0)
  t.same(c.turn('10.8.8.8', 0), { kind: 'wait', waitMs: 250, presumed: true }, 'the wait after 3 failures, not 4')
  t.same(b.turn('10.9.9.10', 0), { kind: 'now', presumed: false }, 'another address is not slowed')
})

/** A hello with a token from localAddress: its answer (welcome or error) and how long it took. */
async function hello(
  port: number,
  token: string,
  localAddress = '127.0.0.1',
): Promise<{ peer: Peer; reply: { type: string; code?: string; message?: string }; ms: number }> {
  const peer = await Peer.open(port, localAddress)
  const started = performance.now()
  peer.send({ type: 'hello', protocol: 4, role: 'writer', token })
  for (;;) {
    const reply = peer.messages.find((m) => m.type === 'welcome' || m.type === 'error')
    if (reply !== undefined) return { peer, reply: reply as { type: string }, ms: performance.now() - started }
    if (performance.now() - started > 15_000) throw new Error('no answer to the hello')
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

t.test('guesses from one address are slowed, others and good tokens are not', async (t) => {
  const listener = await Listener.start({ host: '127.0.0.1', port: 0, dir: tempDir(t), token: 'the-real-token', maxTokenBackoffMs: 1000 })
  t.teardown(() => listener.close())
  const port = listener.address().port

  // 64 guessers in parallel from 127.0.0.1 for 3 s.
  let answered = 0
  let refused = 0
  const until = performance.now() + 3000
  const guesser = async (i: number): Promise<void> => {
    for (let n = 0; performance.now() < until && n < 5000; n++) {
      const { peer, reply } = await hello(port, `guess-${i}-${n}`)
      peer.close()
      if (reply.code === 'unauthorized') answered++
      else if (reply.code === 'limit' && /too many wrong tokens from 127\.0\.0\.1/.test(reply.message ?? '')) refused++
      else throw new Error(`unexpected answer ${JSON.stringify(reply)}`)
      if (reply.code === 'limit') await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  const guessing = Promise.all(Array.from({ length: 64 }, (_, i) => guesser(i)))

  // Meanwhile another address: a good token and a wrong one, both answered at once. A listener that slowed
  // every address would hold each try behind the guessers' queue; a machine loaded by other work can
  // hold one: the quickest of up to three tries is judged.
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const quickest = async (token: string, address: string): Promise<{ reply: { type: string; code?: string }; ms: number[] }> => {
    const ms: number[] = []
    for (;;) {
      const answer = await hello(port, token, address)
      answer.peer.close()
      ms.push(answer.ms)
      if (answer.ms < 500 || ms.length === 3) return { reply: answer.reply, ms }
    }
  }
  const other = await quickest('the-real-token', '127.0.0.2')
  t.equal(other.reply.type, 'welcome', 'a good token from another address gets in')
  t.ok(Math.min(...other.ms) < 500, `at once (${other.ms.map((ms) => ms.toFixed(0)).join(', ')} ms)`)
  const otherWrong = await quickest('nope', '127.0.0.3')
  t.match(otherWrong.reply, { code: 'unauthorized' })
  t.ok(
    Math.min(...otherWrong.ms) < 500,
    `a first wrong token from a third address is answered at once (${otherWrong.ms.map((ms) => ms.toFixed(0)).join(', ')} ms)`,
  )
  await guessing
  t.ok(answered <= 12, `${answered} guesses answered in 3 s from one address (${refused} refused without a look at the token)`)
  t.ok(refused > 0, 'the rest were refused')

  // The slowed address with the good token: welcome after its wait, and it is served.
  let good = await hello(port, 'the-real-token')
  if (good.reply.code === 'limit') {
    // A guess given a turn just before the guessing stopped reserves the next one up to a cap after
    // its own (two caps ahead at most): the refusal says when to come back, as a client would.
    const retryS = Number(/answered in (\d+) s at the earliest/.exec(good.reply.message ?? '')?.[1])
    t.ok(retryS >= 1 && retryS <= 2, `refused at once, told to come back within two caps (${retryS} s)`)
    good.peer.close()
    await new Promise((resolve) => setTimeout(resolve, retryS * 1000))
    good = await hello(port, 'the-real-token')
  }
  t.equal(good.reply.type, 'welcome', `a good token from the slowed address gets in after ${good.ms.toFixed(0)} ms`)
  t.ok(good.ms <= 1000 + 500, 'within the cap')
  good.peer.send({ type: 'run', meta: runMeta(runIdOf(0x42)) })
  t.match(await good.peer.next('run-ok'), { runId: runIdOf(0x42) })
  good.peer.close()
})
