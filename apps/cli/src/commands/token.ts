import { shownText } from '@mq/router-client'
import type { Command } from 'commander'
import type { Runtime } from '../context'
import type { CliAdmin } from '../io'
import { lifetimeArg } from '../options'

type TokenInfo = Awaited<ReturnType<CliAdmin['listTokens']>>[number]

/** `mq token create|list|delete`: client tokens kept in the meta group (needs an admin token). */
export function registerTokenCommands(program: Command, runtime: Runtime): void {
  const token = program
    .command('token')
    .description("client tokens kept in the cluster (beside the servers' --auth-file); needs an admin token")
    .addHelpText(
      'after',
      "\nExamples:\n  $ mq token create orders-app --role 'producer:orders.*' --role 'consumer:orders.*'\n  $ mq token create ci --role admin --expires-in 30d\n  $ mq token list\n  $ mq token delete orders-app\n",
    )
  token
    .command('create')
    .description('make a token and print its secret (shown once; only its SHA-256 is kept)')
    .argument('<name>', "the token's name (letters, digits, '.', '_', '-')")
    .requiredOption(
      '-r, --role <role>',
      'admin, producer:PATTERN, consumer:PATTERN or viewer:PATTERN (sees the queues, takes and sends nothing; * matches any run of characters); repeat for more',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option(
      '--expires-in <duration>',
      'refuse calls with it after this long (e.g. 12h, 30d; at most 10 years); default: never',
      lifetimeArg,
    )
    .action((name: string, opts: { role: string[]; expiresIn?: number }, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const created = await client.admin.createToken(name, opts.role, { ttlMs: opts.expiresIn ?? 0 })
        if (out.json) {
          out.record({
            name: created.name,
            token: created.token,
            roles: opts.role,
            expiresAtMs: created.expiresAtMs,
          })
        } else {
          // The secret alone on stdout (for `$(mq token create …)`).
          out.text(`${created.token}\n`)
        }
      }),
    )
  token
    .command('list')
    .description('every token kept in the cluster: name, roles, when it was made and expires (never secrets)')
    .action((_opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        const tokens = await client.admin.listTokens()
        const now = Date.now()
        out.table(
          tokens,
          [
            { header: 'NAME', value: (t: TokenInfo) => t.name },
            // Escaped as the KEY column of peek: a role's pattern is any text (the cluster takes
            // newlines and escape sequences in it), which split the table's row and reached the terminal.
            { header: 'ROLES', value: (t: TokenInfo) => shownText(t.roles.join(',')) },
            { header: 'CREATED', value: (t: TokenInfo) => new Date(t.createdAtMs).toISOString() },
            { header: 'EXPIRES', value: (t: TokenInfo) => expiry(t.expiresAtMs, now) },
          ],
          (t) => t,
        )
      }),
    )
  token
    .command('delete')
    .description('delete a token: calls with it are refused from then on')
    .argument('<name>')
    .action((name: string, _opts, command: Command) =>
      runtime.run(command, async ({ client, out }) => {
        await client.admin.deleteToken(name)
        if (out.json) out.record({ token: name, deleted: true })
        else out.text(`deleted token ${name}\n`)
      }),
    )
}

/** A token's expiry for the table: `never`, the time, or the time and `(expired)`. */
function expiry(expiresAtMs: number, nowMs: number): string {
  if (expiresAtMs === 0) return 'never'
  const at = new Date(expiresAtMs).toISOString()
  return expiresAtMs <= nowMs ? `${at} (expired)` : at
}
