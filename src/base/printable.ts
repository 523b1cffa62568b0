/**
 * Text from the network or from disk (a host name, a path, a writer's end text, a listener's message)
 * printed to a terminal or a one-line log: C0 and C1 controls, DEL and the Unicode line and paragraph
 * separators can steer a terminal or start a line of their own, so none of them gets through.
 */
const controls = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029'
const control = new RegExp(`[${controls}]`, 'g')
const controlRun = new RegExp(`[${controls}]+`, 'g')

/** Each control character as '?': the text keeps its length and shows where one was. */
export function printable(text: string): string {
  return text.replace(control, '?')
}

/** Each run of control characters as one space; the rest as it is (a table cell keeps its spacing). */
export function spaced(text: string): string {
  return text.replace(controlRun, ' ')
}

/** On one line: each run of control characters and white space as one space, its first maxChars kept. */
export function oneLine(text: string, maxChars = 300): string {
  const flat = spaced(text).replace(/\s+/g, ' ').trim()
  return flat.length > maxChars ? `${flat.slice(0, maxChars)}...` : flat
}
