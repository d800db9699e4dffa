import { execFileSync } from 'node:child_process'
import { closeSync, constants, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LevelEngine } from '@mq/kv-storage'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort, singleNodeArgs, startServer, untilOutput } from './processes'

const dir = mkdtempSync(join(tmpdir(), 'mq-start-signals-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/**
 * Opens the FIFO `path` for writing once a process has opened it for reading (polled without
 * blocking: ENXIO until then); its descriptor.
 */
async function openOnceRead(path: string, timeoutMs = 30_000): Promise<number> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return openSync(path, constants.O_WRONLY | constants.O_NONBLOCK)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO' || Date.now() > deadline) throw error
      await new Promise((r) => setTimeout(r, 20))
    }
  }
}

/**
 * Starts node `nodeId` with its token file a FIFO, sends it `signal` while its start waits on
 * that file, then lets the start go on (writes the tokens).
 */
async function signalledWhileStarting(nodeId: string, signal: NodeJS.Signals) {
  const fifo = join(dir, `${nodeId}.tokens`)
  execFileSync('mkfifo', [fifo])
  const address = `127.0.0.1:${await freePort()}`
  const server = startServer(
    singleNodeArgs(nodeId, address, dir, ['--auth-file', fifo, '--peer-token', 'a-peer-token-for-tests']),
  )
  let fd: number | undefined
  try {
    fd = await openOnceRead(fifo)
    server.child.kill(signal)
    writeSync(fd, '{ "tokens": [] }')
  } catch {
    // EPIPE: the process is gone already (the test fails on its exit).
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
  return { server, fifo }
}

// A real mq-server process, ended by its PID. Its start reads the token file (--auth-file)
// before it opens the database: a FIFO holds it there, mid-start, until the test writes it.
describe('mq-server signalled while it starts', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'finishes the start, stops in order and exits 0 on %s, its database closed',
    async (signal) => {
      const nodeId = `s-${signal.toLowerCase()}`
      const { server } = await signalledWhileStarting(nodeId, signal)
      try {
        // Before, no handler was installed until the node served: Node's default action
        // ended the process there and then, its start half done.
        expect(await server.exited).toEqual({ code: 0, signal: null })
        expect(server.output()).toMatch(new RegExp(`node ${nodeId} listening on`))
        expect(server.output()).toMatch(new RegExp(`node ${nodeId} stopping`))
        // Closed on the way out: its LevelDB lock is free.
        const engine = await LevelEngine.open(join(dir, nodeId, 'db'))
        await engine.close()
      } finally {
        server.child.kill('SIGKILL')
      }
    },
    60_000,
  )

  it('says on SIGTERM that a lone node handed no leadership away', async () => {
    const nodeId = 's-alone'
    const server = startServer(singleNodeArgs(nodeId, `127.0.0.1:${await freePort()}`, dir))
    try {
      await untilOutput(server, /group 1: leader s-alone/, 50)
      server.child.kill('SIGTERM')
      expect(await server.exited).toEqual({ code: 0, signal: null })
      // Before, it said "handed the leadership of 2 group(s) away (2 still led)".
      expect(server.output()).toMatch(/handed the leadership of 0 group\(s\) away \([1-9]\d* still led\)/)
    } finally {
      server.child.kill('SIGKILL')
    }
  }, 60_000)

  it('reads its files again once it serves on a SIGHUP that comes while it starts, and goes on', async () => {
    const nodeId = 's-sighup'
    const { server, fifo } = await signalledWhileStarting(nodeId, 'SIGHUP')
    try {
      // Before, Node's default action for SIGHUP (until the node served) ended the process.
      const ended = await Promise.race([
        untilOutput(server, new RegExp(`node ${nodeId} listening on`), 50),
        server.exited,
      ])
      expect(ended).toBeUndefined()
      // The reload reads the FIFO again: it is given its tokens once more.
      const again = await openOnceRead(fifo)
      writeSync(again, '{ "tokens": [] }')
      closeSync(again)
      await untilOutput(server, /reloaded 0 file tokens/, 50)
      server.child.kill('SIGTERM')
      expect(await server.exited).toEqual({ code: 0, signal: null })
    } finally {
      server.child.kill('SIGKILL')
    }
  }, 60_000)
})
