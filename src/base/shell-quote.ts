import { nativePort } from '../native/index.js'

/**
 * Quoting for the shell the user pastes into: plain paths stay as they are, anything else goes in
 * single quotes, which neither a POSIX shell nor PowerShell expands inside ($HOME, %PATH%, globs such
 * as [::1]). POSIX escapes a quote as '\'' and PowerShell by doubling it. On Windows the command is written
 * for PowerShell; cmd.exe has no quoting that stops %VAR% expansion.
 */
export function shellQuote(text: string, shell: 'posix' | 'windows' = nativePort().shell): string {
  // PowerShell: a comma is its array operator and @ splats, so both are quoted; inside single quotes
  // it ends the string at the ASCII quote and at U+2018-U+201B alike, and a doubled one stands for itself.
  if (shell === 'windows') return /^[A-Za-z0-9_+=:.\\/-]+$/.test(text) ? text : `'${text.replace(/[\u0027\u2018-\u201b]/g, (q) => q + q)}'`
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`
}

/**
 * A path as a printed command gives it. On Windows with forward slashes (`Z:/tmp/data`, `//server/share/x`):
 * Windows and Node read them as backslashes, and they survive a paste into a POSIX shell (a Linux
 * terminal driving Wine, Git Bash, an ssh session), where `Z:\tmp\data` loses its backslashes. A
 * namespaced path (`\\?\`, `\\.\`) keeps them, in single quotes: Windows takes the rest of such a path literally.
 * A path with a single quote goes in double quotes (quoteForBothShells), or, where none fits both, is for a POSIX shell.
 */
export function quotePath(path: string, shell: 'posix' | 'windows' = nativePort().shell): string {
  if (shell !== 'windows') return shellQuote(path, shell)
  if (!/^\\\\[?.]\\/.test(path)) return quoteForBothShells(path.replace(/\\/g, '/'))
  // A backslash rules out double quotes, and PowerShell's doubled quote is none to a POSIX shell.
  if (powerShellSingleQuotes.test(path)) return shellQuote(path, 'posix')
  // Single quotes keep its backslashes in both shells.
  const quoted = shellQuote(path, shell)
  return quoted.startsWith("'") ? quoted : `'${quoted}'`
}

/** The quotes that end a PowerShell single-quoted string: the ASCII one and U+2018-U+201B. */
const powerShellSingleQuotes = /[\u0027\u2018-\u201b]/
/**
 * What is not literal inside double quotes: to a POSIX shell $, `, \ and " (and ! to an interactive
 * bash or zsh, history expansion); to PowerShell $, ` and its double quotes ", U+201C-U+201E.
 */
const doubleQuoteSpecial = /[$`"\\!\u201c-\u201e]/

/**
 * A Windows path (forward slashes) quoted so that a POSIX shell and PowerShell both read it back as
 * it is. Single quotes do, unless the path holds one: PowerShell's doubled quote ('') closes and
 * reopens a POSIX shell's quotes and drops it, and a POSIX shell's '\'' is no escape to PowerShell.
 * Such a path goes in double quotes, which both keep literally when it holds none of doubleQuoteSpecial;
 * a path that holds both gets the POSIX form, which PowerShell misreads (README, Windows under Wine).
 */
function quoteForBothShells(path: string): string {
  if (!powerShellSingleQuotes.test(path)) return shellQuote(path, 'windows')
  return doubleQuoteSpecial.test(path) ? shellQuote(path, 'posix') : `"${path}"`
}
