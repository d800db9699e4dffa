import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { BENCH_DEFAULT_TIMING, SERVER_DEFAULT_TIMING, timingAgainstDefault } from './timing'

describe('Raft timing', () => {
  // SERVER_DEFAULT_TIMING is a copy (the bench does not depend on the server package): this
  // reads the server's CONFIG_DEFAULTS so that a change there fails here.
  it("matches mq-server's CONFIG_DEFAULTS", () => {
    const source = readFileSync(join(import.meta.dirname, '..', '..', 'server', 'src', 'config.ts'), 'utf8')
    const defaults = /export const CONFIG_DEFAULTS = \{([\s\S]*?)\n\}/.exec(source)?.[1] ?? ''
    const read = (key: string) => Number(new RegExp(`\\b${key}: (\\d+),`).exec(defaults)?.[1])
    expect({
      tickMs: read('tickMs'),
      electionTicks: read('electionTicks'),
      heartbeatTicks: read('heartbeatTicks'),
    }).toEqual(SERVER_DEFAULT_TIMING)
  })

  it("keeps the bench's 20 ms tick and the server's election and heartbeat ticks by default", () => {
    expect(BENCH_DEFAULT_TIMING).toEqual({ tickMs: 20, electionTicks: 10, heartbeatTicks: 2 })
  })

  it("states a timing against the server's default", () => {
    expect(timingAgainstDefault(BENCH_DEFAULT_TIMING)).toBe(
      "a 20 ms Raft tick, election timeout 10 ticks (200 ms), heartbeat 2 ticks: elections time out 2.5× sooner than with mq-server's default (a 50 ms Raft tick, election timeout 10 ticks (500 ms), heartbeat 2 ticks)",
    )
    expect(timingAgainstDefault(SERVER_DEFAULT_TIMING)).toContain(
      "the same election timeout as mq-server's default",
    )
    expect(timingAgainstDefault({ ...SERVER_DEFAULT_TIMING, tickMs: 100 })).toContain(
      'elections time out 2× later',
    )
  })
})
