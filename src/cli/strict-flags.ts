/**
 * Strict flags: a command's arguments are read against the flags it declares before yargs parses
 * them, so an unknown flag is named first (`--sever`, with the closest flag of that command), never
 * hidden behind yargs' "Missing required argument" for the flag it was meant to be. Accepted as yargs
 * accepts them: `--flag`, `--flag=value`, the camelCase form (`--recordSize`), `--no-flag`, the
 * aliases, `-h`/`--help` and `--version` of every command. No command takes a positional argument,
 * so a word that is no flag's value is refused too, and so is every word after `--`. A yes/no flag
 * given with `=` takes `true` or `false` only, and any other flag with `=` a value that is not empty. A flag
 * given twice, in any of its forms, is refused (yargs would keep the last value and drop the first
 * without a word), except an array flag (`report --campaign a --campaign b`: both names); so is
 * `--no-x` for a flag that takes a value (yargs would hand the command `false`). A required flag left
 * out is named with what it takes (`write needs --file PATH`), in the form of every other usage error.
 */
import type { Argv } from 'yargs'
import yargs from 'yargs'

/** What the arguments of one command are read against. */
export interface FlagSpec {
  /** Every name that is a flag of the command: long names, aliases, help and version. */
  readonly names: ReadonlySet<string>
  /** Flags that take no value (a following `true` or `false` is still theirs, as in yargs). */
  readonly booleans: ReadonlySet<string>
  /** Flags that take every word after them (`report --campaign a b`). */
  readonly arrays: ReadonlySet<string>
  /** Flags that take a number: an empty value is none (yargs would read it as 0). */
  readonly numbers: ReadonlySet<string>
  /** The flags a did-you-mean may propose: the long names, hidden ones left out. */
  readonly suggestions: readonly string[]
  /** The flags the command cannot run without (yargs' demandOption), in the order declared. */
  readonly required: readonly string[]
}

/** The flags every command takes, from yargs' .help() and .version(). */
const globalFlags = ['help', 'version']
const globalAliases = ['h']

/** What yargs' getOptions() returns (at run time; its type declarations leave it out). */
interface DeclaredOptions {
  readonly key: Record<string, unknown>
  readonly alias: Record<string, readonly string[]>
  readonly boolean: readonly string[]
  readonly array: readonly string[]
  readonly number: readonly string[]
  readonly hiddenOptions: readonly string[]
  readonly demandedOptions: Record<string, unknown>
}

/** The flags a command declares, read from its yargs builder. */
export function flagSpecOf(options: (y: Argv) => Argv<object>): FlagSpec {
  const declared = (options(yargs([])) as unknown as { getOptions(): DeclaredOptions }).getOptions()
  const longNames = Object.keys(declared.key)
  const aliases = Object.entries(declared.alias).flatMap(([name, others]) => [name, ...others])
  const hidden = new Set<string>(declared.hiddenOptions)
  return {
    names: new Set([...longNames, ...aliases, ...globalFlags, ...globalAliases]),
    booleans: new Set([...declared.boolean, ...globalFlags, ...globalAliases]),
    arrays: new Set(declared.array),
    numbers: new Set(declared.number),
    suggestions: [...longNames.filter((name) => !hidden.has(name)), ...globalFlags],
    required: Object.keys(declared.demandedOptions),
  }
}

/**
 * The required flags args do not give, in any form (`--file`, `--file=x`, `--no-file` aside). Read
 * after unknownArguments found nothing: every flag-like token is then a flag of the command.
 */
export function missingRequiredFlags(args: readonly string[], spec: FlagSpec): string[] {
  const given = new Set<string>()
  for (const token of args) {
    if (token === '--') break
    if (!looksLikeFlag(token)) continue
    const dashes = token.startsWith('--') ? '--' : '-'
    const equals = token.indexOf('=')
    const known = knownFlag(token.slice(dashes.length, equals === -1 ? undefined : equals), spec)
    if (known !== null && !known.negated) given.add(known.name)
  }
  return spec.required.filter((flag) => !given.has(flag))
}

/** What a required flag's value is, as the README's synopsis writes it (VALUE for one not listed). */
const requiredFlagValues: Readonly<Record<string, string>> = { server: 'HOST[:PORT]', file: 'PATH', dir: 'DIR' }

/** `write needs --server HOST[:PORT] and --file PATH`, with the hint every usage error of a command has. */
export function missingRequiredMessage(command: string, missing: readonly string[]): { message: string; hint: string } {
  const flags = missing.map((flag) => `--${flag} ${requiredFlagValues[flag] ?? 'VALUE'}`)
  const listed = flags.length === 1 ? flags[0]! : `${flags.slice(0, -1).join(', ')} and ${flags.at(-1)}`
  return { message: `${command} needs ${listed}`, hint: `plugcheck ${command} --help lists its flags` }
}

/**
 * One argument the command does not take (the flag or word as typed, and the flag it may have meant),
 * a flag without its value, a flag given again (text: the flag, forms: each form it was typed in),
 * or a flag that takes a value negated (text: `--no-x`, flag: `x`).
 */
export interface UnknownArgument {
  readonly text: string
  readonly kind: 'flag' | 'word' | 'no-value' | 'repeated' | 'negated-value' | 'not-yes-no' | 'after-dashes'
  readonly forms?: readonly string[]
  readonly flag?: string
  readonly didYouMean?: string
  /** The flag before it, still waiting for its value (`--token -x`: a value that starts with a dash). */
  readonly after?: string
}

const kebab = (name: string): string => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
/** A negative number is a value, never a flag (yargs reads `--x -1` so too). */
const isNegativeNumber = (token: string): boolean => /^-(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i.test(token)
const looksLikeFlag = (token: string): boolean => token.startsWith('-') && token !== '-' && !isNegativeNumber(token)

/** The flag a token names, as the spec knows it (negated: `--no-x`), or null when the command has no such flag. */
function knownFlag(name: string, spec: FlagSpec): { name: string; negated: boolean } | null {
  for (const candidate of [name, kebab(name)]) {
    if (spec.names.has(candidate)) return { name: candidate, negated: false }
    if (candidate.startsWith('no-') && spec.names.has(candidate.slice(3))) return { name: candidate.slice(3), negated: true }
  }
  return null
}

/** A flag waiting for its value: a known one must get one (yargs would put its default in silently). */
interface Awaiting {
  readonly flag: string
  readonly array: boolean
  readonly known: boolean
  readonly number: boolean
  values: number
}

/**
 * The arguments after the command's name that the command does not take, in the order given, and
 * the flags given without the value they take.
 */
export function unknownArguments(args: readonly string[], spec: FlagSpec): UnknownArgument[] {
  const unknown: UnknownArgument[] = []
  /** Each known flag given so far (by its long name): the forms it was typed in, and whether it is refused yet. */
  const given = new Map<string, Given>()
  let awaiting: Awaiting | null = null
  const valueMissing = (flag: Awaiting | null): void => {
    if (flag?.known && flag.values === 0) unknown.push({ text: flag.flag, kind: 'no-value' })
  }
  for (let i = 0; i < args.length; i++) {
    const token = args[i]!
    if (token === '--') {
      unknown.push(...wordsAfterDashes(args.slice(i + 1)))
      break
    }
    if (!looksLikeFlag(token)) {
      if (awaiting !== null) {
        // `--port "$PORT"` with PORT unset: an empty number is no value, never 0.
        if (awaiting.number && token === '') {
          valueMissing(awaiting)
          awaiting = null
          continue
        }
        awaiting.values++
        if (!awaiting.array) awaiting = null
        continue
      }
      unknown.push({ text: token, kind: 'word' })
      continue
    }
    const dashes = token.startsWith('--') ? '--' : '-'
    const equals = token.indexOf('=')
    const name = token.slice(dashes.length, equals === -1 ? undefined : equals)
    // One dash: one letter, an alias (`-h`); yargs reads `-server` as six of them.
    const known = dashes === '-' && name.length !== 1 ? null : knownFlag(name, spec)
    const before = awaiting
    awaiting = null
    if (known === null) {
      const didYouMean = closestFlag(name, spec.suggestions)
      const dashedValue = before?.known === true && before.values === 0
      unknown.push({
        text: `${dashes}${name}`,
        kind: 'flag',
        ...(didYouMean === undefined ? {} : { didYouMean }),
        ...(dashedValue ? { after: before.flag } : {}),
      })
      // Its value, if it has one, is not a word of its own: `--sever 10.0.0.1:5400` is one mistake.
      if (equals === -1) awaiting = { flag: `${dashes}${name}`, array: false, known: false, number: false, values: 0 }
      continue
    }
    valueMissing(before)
    const typed = `${dashes}${name}`
    if (known.negated && !spec.booleans.has(known.name)) {
      unknown.push({ text: typed, kind: 'negated-value', flag: known.name })
      // `--no-duration 5`: the 5 is the flag's value, not a word of its own.
      if (equals === -1) awaiting = { flag: typed, array: false, known: false, number: false, values: 0 }
      continue
    }
    noteGiven(given, known.name, typed, spec, unknown)
    if (equals !== -1) {
      if (equals === token.length - 1 && spec.numbers.has(known.name)) unknown.push({ text: `--${known.name}`, kind: 'no-value' })
      else unknown.push(...equalsValueRefused(token, equals, known.name, spec))
      continue
    }
    if (spec.booleans.has(known.name) || known.negated) {
      if (/^(true|false)$/.test(args[i + 1] ?? '')) i++
      continue
    }
    awaiting = { flag: `--${known.name}`, array: spec.arrays.has(known.name), known: true, number: spec.numbers.has(known.name), values: 0 }
  }
  valueMissing(awaiting)
  return unknown
}

/**
 * `--flag=value` checked where yargs would read it wrongly without a word: a yes/no flag reads every
 * value but `true` as false (`--direct=yes` would run buffered), and an empty string or list value
 * (`--campaign="$NAME"` with NAME unset) would run as if the flag were left out or given ''.
 */
function equalsValueRefused(token: string, equals: number, flag: string, spec: FlagSpec): UnknownArgument[] {
  const value = token.slice(equals + 1)
  if (spec.booleans.has(flag)) return value === 'true' || value === 'false' ? [] : [{ text: token, kind: 'not-yes-no', flag }]
  return value === '' ? [{ text: `--${flag}`, kind: 'no-value' }] : []
}

/** No command takes a positional argument, so the words after `--` are refused too, never dropped. */
function wordsAfterDashes(words: readonly string[]): UnknownArgument[] {
  return words.map((text) => ({ text, kind: 'after-dashes' }))
}

/** A known flag as given so far. */
interface Given {
  readonly forms: string[]
  refused: boolean
}

/** Records a known flag as given; a second time (an array flag aside), it is refused, named once. */
function noteGiven(given: Map<string, Given>, flag: string, typed: string, spec: FlagSpec, unknown: UnknownArgument[]): void {
  const earlier = given.get(flag)
  if (earlier === undefined) {
    given.set(flag, { forms: [typed], refused: false })
    return
  }
  if (spec.arrays.has(flag)) return
  if (!earlier.forms.includes(typed)) earlier.forms.push(typed)
  if (earlier.refused) return
  earlier.refused = true
  // The entry holds the forms list itself: forms typed later still show in the message.
  unknown.push({ text: `--${flag}`, kind: 'repeated', forms: earlier.forms })
}

/** The message of a usage error naming every argument the command does not take. */
export function unknownArgumentsMessage(command: string, unknown: readonly UnknownArgument[]): { message: string; hint: string } {
  // The first few named, the rest counted: a runaway loop's thousands of flags stay one readable message.
  const more = unknown.length - maxNamedArguments
  const described = unknown.slice(0, maxNamedArguments).map((u) => {
    if (u.kind === 'word') return `unexpected argument ${u.text} (${command} takes flags only)`
    if (u.kind === 'no-value') return `${u.text} needs a value`
    if (u.kind === 'repeated') return `${u.text} is given more than once${formsOf(u)}; ${command} takes it once`
    if (u.kind === 'negated-value') return `${u.text}: ${u.flag} takes a value, it cannot be negated`
    if (u.kind === 'not-yes-no')
      return `${u.text}: --${u.flag} is yes or no: give --${u.flag}, --no-${u.flag}, --${u.flag}=true or --${u.flag}=false`
    if (u.kind === 'after-dashes') return `unexpected argument ${u.text} after -- (${command} takes flags only)`
    return `unknown flag ${u.text}${u.didYouMean === undefined ? '' : ` (did you mean --${u.didYouMean}?)`}`
  })
  const dashedValue = unknown.find((u) => u.after !== undefined)
  const hint =
    dashedValue === undefined
      ? `plugcheck ${command} --help lists the flags of ${command}`
      : `a value that starts with a dash is given with =: ${dashedValue.after}=${dashedValue.text}`
  if (more > 0) described.push(`and ${more} more argument${more === 1 ? '' : 's'} ${command} does not take`)
  return { message: `${described.join('; ')}`, hint }
}

/** How a repeated flag was typed, when not the same way each time: ` (as --recordSize and --record-size)`. */
function formsOf(u: UnknownArgument): string {
  const forms = u.forms ?? []
  return forms.length < 2 ? '' : ` (as ${forms.slice(0, -1).join(', ')} and ${forms.at(-1)})`
}

/** How many of the arguments a command does not take its usage error names one by one. */
const maxNamedArguments = 20

/**
 * The flag of candidates the typed name most likely meant: the nearest by edit distance (a swap of
 * two letters is one edit) when near enough for its length, else the only flag it begins; or none.
 */
export function closestFlag(typed: string, candidates: readonly string[]): string | undefined {
  return closestName(kebab(typed), candidates)
}

/** The name of candidates the typed one most likely meant, by closestFlag's rules, the typed name taken as it is (lower-cased). */
export function closestName(typed: string, candidates: readonly string[]): string | undefined {
  const name = typed.toLowerCase()
  const nearEnough = name.length <= 4 ? 1 : name.length <= 8 ? 2 : 3
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate)
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  if (best !== undefined && bestDistance <= nearEnough) return best
  const extended = name.length >= 3 ? candidates.filter((candidate) => candidate.startsWith(name)) : []
  return extended.length === 1 ? extended[0] : undefined
}

/** Insertions, deletions, substitutions and swaps of two neighbouring letters (optimal string alignment). */
export function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  )
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let distance = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, rows[i - 2]![j - 2]! + 1)
      rows[i]![j] = distance
    }
  return rows[a.length]![b.length]!
}
