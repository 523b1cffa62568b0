/**
 * Invariants: what the code itself guarantees, checked where breaking it would make a wrong answer
 * (TigerBeetle's rule: programmer errors assert, operating errors are handled). Never for input from
 * disk, network or flags: those get a clear message and an exit code (errors.ts), or a finding in
 * verify's report. A failed assertion is a bug in plugcheck, so it throws (the command exits 3 with the
 * message) rather than carrying on with state it cannot trust.
 */
export class AssertionError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'AssertionError'
  }
}

/** Throws an AssertionError with message unless condition holds; narrows condition for the compiler. */
export function assert(condition: boolean, message: string | (() => string)): asserts condition {
  if (!condition) throw new AssertionError(typeof message === 'string' ? message : message())
}
