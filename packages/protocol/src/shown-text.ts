/**
 * Characters text shown to a person never carries as they are: the C0 controls, DEL, the C1
 * controls and the bidirectional controls. Error messages quote what the caller sent with
 * JSON.stringify, which escapes the C0 controls but leaves the others: a queue name with a DEL
 * in it (`fuzz-contr\x7fl`) was refused as `queue name "fuzz-contrl" may hold only letters, …`,
 * a name that looks valid (found by the request fuzz), and a C1 CSI or a right-to-left override
 * reached the caller's terminal, where it changes what is shown. `mq consume` prints message
 * bodies, keys and headers through it too.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it finds
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/
/**
 * A lone surrogate, escaped as JSON.stringify escapes it: V8's own messages carry one (JSON.parse's
 * "Unexpected token '\ud83d'"), and an error status holding one was never sent (grpc-js's
 * encodeURI threw: the call ran to its deadline, and the server had an unhandled rejection).
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const UNSHOWN = new RegExp(`${CONTROLS.source}|${LONE_SURROGATE.source}`, 'g')

/** The short escapes JSON has for some C0 controls. */
const SHORT: Readonly<Record<string, string>> = {
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
}

/**
 * `text` with every UNSHOWN character escaped as JSON would (`\n`, `\t`, else `\u001b`), so
 * that it stays on one line and acts on no terminal; other text (any script, emoji) as it is.
 */
export function shownText(text: string): string {
  return text.replace(UNSHOWN, (c) => SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/** An escape shownText writes: `\u` and four hex digits, or a short one (`\n`). */
const ESCAPE = /\\(u[0-9a-f]{4}|[btnfr])/g

/**
 * Where to cut `text` (shownText's output, or any text) to keep at most `max` UTF-16 units of
 * it: at `max`, or before it when that would split a surrogate pair or an escape shownText
 * wrote (a cut `\u20` reads as text the message never held). A backslash the text holds
 * itself, followed by what looks like an escape, is kept whole the same way.
 */
export function shownCut(text: string, max: number): number {
  if (text.length <= max) return text.length
  let end = max
  const code = text.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end--
  // Only an escape starting in the 5 units before the cut can cross it.
  ESCAPE.lastIndex = Math.max(0, end - 5)
  for (let m = ESCAPE.exec(text); m !== null && m.index < end; m = ESCAPE.exec(text))
    if (m.index + m[0].length > end) return m.index
  return end
}
