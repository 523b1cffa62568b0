/**
 * A binary min-heap: the least item first (push and pop in O(log n)). The store's start uses it to
 * know the oldest run kept in the read-back cache while runs are replayed in directory order, not in
 * announcement order, so that the newest ones that fit stay without holding every run's spans.
 */
export class MinHeap<T> {
  private readonly items: T[] = []

  constructor(private readonly less: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length
  }

  peek(): T | undefined {
    return this.items[0]
  }

  push(item: T): void {
    const items = this.items
    let i = items.push(item) - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.less(items[i]!, items[parent]!)) break
      ;[items[i], items[parent]] = [items[parent]!, items[i]!]
      i = parent
    }
  }

  pop(): T | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (items.length === 0 || last === undefined) return top
    items[0] = last
    for (let i = 0; ; ) {
      const left = 2 * i + 1
      const right = left + 1
      let least = i
      if (left < items.length && this.less(items[left]!, items[least]!)) least = left
      if (right < items.length && this.less(items[right]!, items[least]!)) least = right
      if (least === i) break
      ;[items[i], items[least]] = [items[least]!, items[i]!]
      i = least
    }
    return top
  }
}
