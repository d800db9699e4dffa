import { createProgram } from '../src/program'

/** Runs `mq-server dev-certs <args>` in this process: its exit code (undefined = 0) and what it printed. */
export async function devCerts(
  args: readonly string[],
): Promise<{ lines: string[]; errors: string[]; code: number | undefined }> {
  const io = { lines: [] as string[], errors: [] as string[], code: undefined as number | undefined }
  await createProgram({
    out: (l) => io.lines.push(l),
    err: (l) => io.errors.push(l),
    exit: (c) => {
      io.code = c
    },
  }).parseAsync(['dev-certs', ...args], { from: 'user' })
  return io
}
