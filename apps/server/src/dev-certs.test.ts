import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { makeDevCerts } from './dev-certs'

const root = mkdtempSync(join(tmpdir(), 'mq-dev-certs-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

describe('makeDevCerts: --hosts', () => {
  it('refuses a host that is no name or address (one with a port) before writing anything', () => {
    // `--hosts mq.example:7001` went to openssl as IP:mq.example:7001: it failed with OpenSSL's
    // error stack ("bad ip address") after writing ca.crt, ca.key and node.key, and the same
    // command with the port taken off was then refused: "already holds …; pass --force".
    for (const host of ['mq.example:7001', '10.0.0.5:7001', 'my host', 'a,b']) {
      const dir = join(root, `d${Math.random().toString(36).slice(2)}`)
      expect(() => makeDevCerts({ dir, hosts: [host], days: 1, force: false })).toThrow(
        /is not a host name or IP address/,
      )
      expect(() => readdirSync(dir)).toThrow(/ENOENT/)
    }
  })

  it('takes names and IPv4 and IPv6 addresses', () => {
    const dir = join(root, 'ok')
    const files = makeDevCerts({
      dir,
      hosts: ['mq.example', '10.0.0.5', '::1', '[fe80::1]'],
      days: 1,
      force: false,
    })
    expect(readdirSync(dir)).toContain('node.crt')
    expect(files.nodeCert).toBe(join(dir, 'node.crt'))
  })
})
