/**
 * The coverage map: for each module of src/ without a unit test of its own name (src/x/y.ts ->
 * test/unit/x/y.test.ts), the tests that stand for it. test/unit/coverage-map.test.ts holds every
 * module to one or the other, and each listed test to reaching its module (through its imports, or
 * by running the command line that loads it). `node --import tsx scripts/coverage-map.ts` prints the
 * entries a new module lacks.
 */
export const coveredBy: Readonly<Record<string, readonly string[]>> = {}
