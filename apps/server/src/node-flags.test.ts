import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { SERVER_NODE_FLAGS } from '@mq/protocol'
import { describe, expect, it } from 'vitest'

describe('the server process node flags', () => {
  it('are the ones the mq-server bin shebang runs node with', () => {
    const first = readFileSync(new URL('./main.ts', import.meta.url), 'utf8').split('\n')[0]
    expect(first).toBe(`#!/usr/bin/env -S node ${SERVER_NODE_FLAGS.join(' ')}`)
  })

  it('are accepted by this node (an unknown flag stops it with "bad option")', () => {
    const run = spawnSync(
      process.execPath,
      [...SERVER_NODE_FLAGS, '-e', 'console.log(JSON.stringify(process.execArgv.slice(0, -2)))'],
      { encoding: 'utf8' },
    )
    expect(run.stderr).toBe('')
    expect(run.status).toBe(0)
    expect(JSON.parse(run.stdout)).toEqual([...SERVER_NODE_FLAGS])
  })
})
