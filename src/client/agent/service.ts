/**
 * `plugcheck agent --print-service`: the definition of a service that starts this agent at boot, a
 * systemd unit or a Windows scheduled task, with the agent's own command line. It touches nothing.
 *
 * A systemd unit is world-readable (`systemctl cat`, /etc/systemd/system): the listener's token never
 * goes into it. The unit loads a root-only file as a credential (LoadCredential=, systemd 247 or
 * later) and the agent reads its copy with --token-file; the commands printed on stderr create that
 * file with mode 0600 from --token, or keep the --token-file given. RequiresMountsFor= the data file's
 * directory: at a boot where that file system did not mount, the agent does not start, rather than
 * write to the empty mount point below it.
 */
import { realpathSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { usageError } from '../../base/errors.js'
import { shellQuote } from '../../base/shell-quote.js'
import { selfCommand } from '../../exe/sea.js'

export type ServiceKind = 'systemd' | 'windows'

/** What the service is made of: the agent's own arguments and what they name. */
export interface ServiceSource {
  /** The agent's command line after `plugcheck`, --print-service included. */
  readonly argv: readonly string[]
  /** --file, absolute. */
  readonly file: string
  /** The listener's token, from --token or --token-file. */
  readonly token?: string
  /** --token-file, absolute, when the token came from a file. */
  readonly tokenFile?: string
}

/** The definition (for stdout, to be saved as it is) and the commands that install it (for stderr). */
export interface ServicePrint {
  readonly definition: string
  readonly steps: string
}

export const unitName = 'plugcheck-agent.service'
export const unitPath = `/etc/systemd/system/${unitName}`
/** Where the printed commands put the token given with --token: a directory and a file only root reads. */
export const tokenDir = '/etc/plugcheck'
export const tokenPath = `${tokenDir}/agent.token`
/** The credential's name: the agent reads it at ${CREDENTIALS_DIRECTORY}/<name>. */
export const credentialName = 'plugcheck-token'
const enableCommand = `systemctl daemon-reload && systemctl enable --now ${unitName}`

export function printService(kind: ServiceKind, source: ServiceSource): ServicePrint {
  return kind === 'systemd' ? systemdService(source) : windowsService(source)
}

/** What becomes of one of the agent's flags in the service's command line: dropped, or its value replaced. */
type FlagFate = 'drop' | { readonly value: string }

function systemdService(source: ServiceSource): ServicePrint {
  const command = agentCommand(source.argv, { 'print-service': 'drop', file: { value: source.file }, token: 'drop', 'token-file': 'drop' })
  const credentialFile = source.tokenFile ?? tokenPath
  const hasToken = source.token !== undefined
  // The token goes into a file of one line (token-file.ts): one holding a line end could not be read back.
  if (source.token !== undefined && /[\r\n]/.test(source.token))
    throw usageError('the token holds a line end: it cannot go into a token file of one line', 'give the listener a token of one line')
  const execStart = command.map(systemdQuote).join(' ')
  const tokenArgs = hasToken ? ` --token-file \${CREDENTIALS_DIRECTORY}/${credentialName}` : ''
  const definition = [
    `# save as ${unitPath}, then: ${enableCommand}`,
    ...(hasToken
      ? [
          `# the listener's token is not in this file: systemd gives the agent a copy of ${credentialFile} (root's, mode 0600)`,
          '# (LoadCredential= needs systemd 247 or later: systemctl --version)',
        ]
      : []),
    '[Unit]',
    'Description=plugcheck agent: verify the last power-cut cycle, report it, write the next one',
    'After=network-online.target',
    'Wants=network-online.target',
    // The data file's file system mounted first, or the agent not started: never a write to the empty mount point.
    `RequiresMountsFor=${mountPaths(dirname(source.file)).map(systemdPathQuote).join(' ')}`,
    '',
    '[Service]',
    'Type=simple',
    ...(hasToken ? [`LoadCredential=${credentialName}:${systemdVerbatimPath(credentialFile)}`] : []),
    `ExecStart=${execStart}${tokenArgs}`,
    'Restart=no',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n')
  return { definition, steps: systemdSteps(source) }
}

/** Shell lines, to paste as root after saving the unit: the token's file (from --token) made 0600 before the token goes in. */
function systemdSteps(source: ServiceSource): string {
  const token = source.token
  const lines =
    source.tokenFile !== undefined
      ? [
          `# the unit on stdout goes to ${unitPath}; it loads the token from ${source.tokenFile}, which only root may read; as root:`,
          `chown root: ${shellQuote(source.tokenFile, 'posix')} && chmod 0600 ${shellQuote(source.tokenFile, 'posix')}`,
        ]
      : token !== undefined
        ? [
            `# the unit on stdout goes to ${unitPath}; the token goes to ${tokenPath}, created mode 0600 before it is written; as root:`,
            `install -d -m 0700 ${tokenDir}`,
            `install -m 0600 /dev/null ${tokenPath}`,
            `printf '%s\\n' ${shellQuote(token, 'posix')} > ${tokenPath}`,
          ]
        : [`# the unit on stdout goes to ${unitPath}; as root:`]
  return `${[...lines, enableCommand].join('\n')}\n`
}

function windowsService(source: ServiceSource): ServicePrint {
  const command = agentCommand(source.argv, {
    'print-service': 'drop',
    file: { value: source.file },
    ...(source.tokenFile === undefined ? {} : { 'token-file': { value: source.tokenFile } }),
  })
  const task = command.map(windowsArgQuote).join(' ')
  const lines = [
    '# run in an elevated PowerShell: the task starts the agent at every boot as SYSTEM (remove it with: schtasks /Delete /TN plugcheck-agent)',
    `schtasks /Create /TN plugcheck-agent /SC ONSTART /RU SYSTEM /TR ${shellQuote(task, 'windows')}`,
  ]
  if (task.length > 261)
    lines.push(
      `# note: schtasks takes at most 261 characters after /TR (this is ${task.length}): put the command in a .cmd file and give /TR its path`,
    )
  return { definition: `${lines.join('\n')}\n`, steps: '' }
}

/** A flag's forms on the command line, as yargs takes them: --token-file and --tokenFile, its value after = or next. */
function flagPattern(names: readonly string[]): RegExp {
  const forms = names.flatMap((n) => [n, n.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())])
  return new RegExp(`^--(${[...new Set(forms)].join('|')})(=.*)?$`)
}

const camelToKebab = (name: string): string => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)

/**
 * The command a service runs: this node, this plugcheck, and the agent's own arguments, each flag
 * named in fates dropped or given its new value (--file as the absolute path the agent resolved: a
 * service starts elsewhere).
 */
export function agentCommand(argv: readonly string[], fates: Readonly<Record<string, FlagFate>>): string[] {
  const pattern = flagPattern(Object.keys(fates))
  const args: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const flag = pattern.exec(arg)
    if (flag === null) {
      args.push(arg)
      continue
    }
    if (flag[2] === undefined) i++ // the value follows as its own argument
    const name = camelToKebab(flag[1]!)
    const fate = fates[name]!
    if (fate !== 'drop') args.push(`--${name}`, fate.value)
  }
  let bin = process.argv[1] ?? ''
  try {
    bin = realpathSync(bin)
  } catch {
    bin = resolve(bin)
  }
  return [...selfCommand(bin), ...args]
}

/**
 * The directory as spelled and, when a symlink leads elsewhere, where it really is: systemd requires
 * the mounts of a path's prefixes as spelled, following no symlink (/data -> /mnt/ssd would leave the
 * mount of /mnt/ssd not required). A directory not made yet is resolved from its deepest existing parent.
 */
export function mountPaths(dir: string): string[] {
  let real = dir
  for (let existing = dir, rest = ''; ; ) {
    try {
      real = join(realpathSync(existing), rest)
      break
    } catch {
      const parent = dirname(existing)
      if (parent === existing) break
      rest = join(basename(existing), rest)
      existing = parent
    }
  }
  return real === dir ? [dir] : [dir, real]
}

/**
 * systemd's ExecStart splitting: plain words as they are, anything else in double quotes with
 * backslash and quote escaped; % (its specifiers) and $ (its variables) doubled everywhere.
 */
export function systemdQuote(text: string): string {
  const escaped = text.replace(/%/g, '%%').replace(/\$/g, '$$$$')
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(escaped)) return escaped
  // A control character as a C escape systemd reads back: a bare \r or \n would end the unit's line.
  const quoted = escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')
  return `"${quoted.replace(/[\x00-\x1f\x7f]/g, controlEscape)}"`
}

const namedEscapes: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' }
const controlEscape = (c: string): string => namedEscapes[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`

/**
 * A path in RequiresMountsFor= (a list of words, unquoted by systemd): % doubled (specifiers), and
 * anything but a plain path in double quotes, a backslash before each backslash and quote. The
 * setting takes no C escapes: a path with a control character cannot be written there.
 */
export function systemdPathQuote(path: string): string {
  checkUnitPath(path)
  const escaped = path.replace(/%/g, '%%')
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(escaped)) return escaped
  return `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`
}

/**
 * A path after LoadCredential=ID: systemd takes the rest of the line as it is (no quotes, no escapes),
 * with its specifiers: % doubled. Whitespace at either end would be cut off the line: refused.
 */
export function systemdVerbatimPath(path: string): string {
  checkUnitPath(path)
  if (path.trim() !== path) throw usageError(`${JSON.stringify(path)} starts or ends with a space: a systemd unit cannot name it`)
  return path.replace(/%/g, '%%')
}

function checkUnitPath(path: string): void {
  if (/[\x00-\x1f\x7f]/.test(path)) throw usageError(`${JSON.stringify(path)} holds a control character: a systemd unit cannot name it`)
}

/** One argument of a Windows command line, as CommandLineToArgvW (and Node on Windows) splits it. */
export function windowsArgQuote(text: string): string {
  if (text.length > 0 && !/[\s"]/.test(text)) return text
  // Backslashes are literal unless they precede a quote: double those, and the ones before the closing quote.
  return `"${text.replace(/(\\*)"/g, '$1$1\\"').replace(/(\\+)$/, '$1$1')}"`
}
