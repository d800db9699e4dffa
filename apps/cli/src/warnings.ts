/** Node's code for "Setting the TLS ServerName to an IP address is not permitted by RFC 6066". */
export const IP_SERVERNAME_WARNING = 'DEP0123'

type EmitWarning = NodeJS.Process['emitWarning']

/**
 * Drops Node's DEP0123 warning and only it: grpc-js names the server it dials as its TLS
 * ServerName, and a server given by IP address (127.0.0.1 in the dev-certs setup) made every
 * TLS command print the warning on stderr. The certificate is still checked against the IP
 * (its subjectAltName); only SNI is sent with an IP, which servers ignore.
 *
 * Done by wrapping `emitWarning`, which Node's TLS code calls at the time: every other
 * warning is emitted and printed as before (removing Node's 'warning' listener, or
 * `--no-deprecation`, would have hidden them too). Called by the binary only.
 */
export function silenceIpServernameWarning(target: { emitWarning: EmitWarning } = process): void {
  const emit = target.emitWarning
  const filtered = function (this: unknown, warning: string | Error, ...rest: unknown[]): void {
    if (warningCode(warning, rest[0], rest[1]) === IP_SERVERNAME_WARNING) return
    ;(emit as (...args: unknown[]) => void).apply(this, [warning, ...rest])
  }
  target.emitWarning = filtered as EmitWarning
}

/** The code of a warning, as given to `emitWarning` in any of its forms. */
function warningCode(warning: string | Error, second: unknown, third: unknown): unknown {
  if (warning instanceof Error) return (warning as { code?: unknown }).code
  if (typeof second === 'object' && second !== null) return (second as { code?: unknown }).code
  return third
}
