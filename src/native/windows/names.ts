/**
 * File names Win32 treats specially (Microsoft Learn, "Naming Files, Paths, and Namespaces"): a
 * reserved device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9 and their superscript-digit forms,
 * CONIN$, CONOUT$), alone or with any extension, and a name ending in a dot or a space, which Win32
 * path normalization strips. Node and plugcheck's port open such names literally (\\?\ paths), but
 * most Windows programs cannot open, list or delete them, so plugcheck refuses to create them.
 */
import { win32 as win32Path } from 'node:path'

const reservedStem = /^(CON|PRN|AUX|NUL|COM[0-9\u00b9\u00b2\u00b3]|LPT[0-9\u00b9\u00b2\u00b3]|CONIN\$|CONOUT\$)$/i

/** Why the last component of path is not a safe file name on Windows; null when it is. */
export function unsafeWindowsFileName(path: string): string | null {
  const name = win32Path.basename(path)
  if (name === '' || name === '.' || name === '..') return null
  if (/[. ]$/.test(name)) return `"${name}" ends in a dot or a space, which Windows strips from file names`
  const stem = name.split('.')[0]!.replace(/ +$/, '')
  if (reservedStem.test(stem)) return `"${name}" is a reserved device name on Windows (${stem.toUpperCase()})`
  return null
}
