import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeDevCerts } from './dev-certs'
import { PemFiles } from './pem-files'

const dir = mkdtempSync(join(tmpdir(), 'mq-pem-'))
const paths = { cert: join(dir, 'node.crt'), key: join(dir, 'node.key'), ca: join(dir, 'ca.crt') }
let other: ReturnType<typeof makeDevCerts>

beforeAll(() => {
  makeDevCerts({ dir: join(dir, 'a'), hosts: [], days: 2, force: false })
  other = makeDevCerts({ dir: join(dir, 'b'), hosts: [], days: 2, force: false })
  for (const f of ['node.crt', 'node.key', 'ca.crt']) copyFileSync(join(dir, 'a', f), join(dir, f))
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

const nextTurn = () => new Promise((r) => setImmediate(r))

describe('PemFiles', () => {
  it('gives listeners the files after the call that added them, and again after each reload', async () => {
    const files = new PemFiles(paths)
    const identities: string[] = []
    const cas: number[] = []
    const onIdentity = (u: { certificate: Buffer } | null) => identities.push(u?.certificate.toString() ?? '')
    const onCa = (u: { caCertificate: Buffer } | null) => cas.push(u?.caCertificate.length ?? 0)
    files.addIdentityCertificateListener(onIdentity)
    files.addCaCertificateListener(onCa)
    // Not synchronously: grpc-js registers its server's watcher after adding its listener.
    expect(identities).toEqual([])
    await nextTurn()
    expect(identities).toHaveLength(1)
    expect(cas).toHaveLength(1)
    copyFileSync(other.nodeCert, paths.cert)
    copyFileSync(other.nodeKey, paths.key)
    files.reload()
    await nextTurn()
    expect(identities).toHaveLength(2)
    expect(identities[1]).not.toBe(identities[0])
    // A removed listener hears nothing more.
    files.removeIdentityCertificateListener(onIdentity)
    files.reload()
    await nextTurn()
    expect(identities).toHaveLength(2)
    expect(cas).toHaveLength(3)
  })

  it('refuses a missing file, a file that is not PEM, or a key of another certificate, and keeps what it had', async () => {
    copyFileSync(join(dir, 'a', 'node.crt'), paths.cert)
    copyFileSync(join(dir, 'a', 'node.key'), paths.key)
    const files = new PemFiles(paths)
    const identities: Buffer[] = []
    files.addIdentityCertificateListener((u) => u && identities.push(u.certificate))
    await nextTurn()
    copyFileSync(other.nodeKey, paths.key)
    expect(() => files.reload()).toThrow(/--tls-cert .*mismatch/)
    writeFileSync(paths.key, 'not a key')
    expect(() => files.reload()).toThrow(/--tls-key .* is not a PEM file/)
    rmSync(paths.key)
    expect(() => files.reload()).toThrow(/--tls-key .*ENOENT/)
    await nextTurn()
    expect(identities).toHaveLength(1)
    expect(() => new PemFiles(paths)).toThrow(/--tls-key/)
  })
})
