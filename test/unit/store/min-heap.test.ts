/**
 * MinHeap: pop gives the least item first under the given order, whatever order the pushes came in;
 * checked against a sorted copy, for seeded random inputs with duplicates and with pushes and pops
 * interleaved.
 */
import t from 'tap'
import { MinHeap } from '../../../src/store/min-heap.js'

/** Seeded xorshift32: integers in [0, below). */
function seeded(seed: number): (below: number) => number {
  let state = seed >>> 0 || 1
  return (below) => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    state >>>= 0
    return state % below
  }
}

const numbers = () => new MinHeap<number>((a, b) => a < b)

function drain<T>(heap: MinHeap<T>): T[] {
  const out: T[] = []
  for (let left = heap.size; left > 0; left--) out.push(heap.pop() as T)
  return out
}

t.test('empty: size 0, peek and pop undefined', async (t) => {
  const heap = numbers()
  t.equal(heap.size, 0)
  t.equal(heap.peek(), undefined)
  t.equal(heap.pop(), undefined)
  t.equal(heap.size, 0, 'popping an empty heap leaves it empty')
})

t.test('one item', async (t) => {
  const heap = numbers()
  heap.push(7)
  t.equal(heap.size, 1)
  t.equal(heap.peek(), 7)
  t.equal(heap.pop(), 7)
  t.equal(heap.size, 0)
  t.equal(heap.pop(), undefined)
})

t.test('ascending, descending and equal pushes all come out sorted', async (t) => {
  const cases: [string, number[]][] = [
    ['ascending', [1, 2, 3, 4, 5, 6, 7, 8]],
    ['descending', [8, 7, 6, 5, 4, 3, 2, 1]],
    ['equal', [3, 3, 3, 3]],
    ['zigzag', [5, 1, 6, 2, 7, 3, 8, 4, 0]],
  ]
  for (const [name, input] of cases) {
    const heap = numbers()
    for (const n of input) heap.push(n)
    t.equal(heap.size, input.length)
    t.equal(heap.peek(), Math.min(...input), `${name}: peek is the least`)
    t.same(
      drain(heap),
      [...input].sort((a, b) => a - b),
      name,
    )
  }
})

t.test('seeded random pushes, with duplicates, pop in sorted order', async (t) => {
  for (const seed of [1, 2, 3, 1234, 99_999]) {
    const random = seeded(seed)
    const input: number[] = []
    for (let i = 0, n = 1 + random(500); i < n; i++) input.push(random(100))
    const heap = numbers()
    for (const n of input) heap.push(n)
    t.same(
      drain(heap),
      [...input].sort((a, b) => a - b),
      `seed ${seed}, ${input.length} items`,
    )
  }
})

t.test('pushes and pops interleaved agree with a sorted list at every step', async (t) => {
  const random = seeded(77)
  const heap = numbers()
  const reference: number[] = []
  let mismatches = 0
  for (let step = 0; step < 3000; step++) {
    if (random(3) < 2 || reference.length === 0) {
      const n = random(1000)
      heap.push(n)
      reference.push(n)
      reference.sort((a, b) => a - b)
    } else if (heap.pop() !== reference.shift()) mismatches++
    if (heap.size !== reference.length || heap.peek() !== reference[0]) mismatches++
  }
  t.equal(mismatches, 0)
  t.same(drain(heap), reference)
})

t.test('the order is the caller’s: objects by a key, and a reversed order', async (t) => {
  interface Run {
    id: string
    announcedMs: number
  }
  const runs: Run[] = [
    { id: 'c', announcedMs: 300 },
    { id: 'a', announcedMs: 100 },
    { id: 'd', announcedMs: 400 },
    { id: 'b', announcedMs: 200 },
  ]
  const oldest = new MinHeap<Run>((x, y) => x.announcedMs < y.announcedMs)
  for (const r of runs) oldest.push(r)
  t.same(
    drain(oldest).map((r) => r.id),
    ['a', 'b', 'c', 'd'],
  )
  const newest = new MinHeap<number>((a, b) => a > b)
  for (const n of [3, 9, 1, 7]) newest.push(n)
  t.same(drain(newest), [9, 7, 3, 1])
})
