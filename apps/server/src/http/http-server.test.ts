import dns from 'node:dns'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { get, request } from 'node:http'
import { get as getHttps } from 'node:https'
import { connect, createServer, Server as NetServer, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Role } from '@mq/raft-core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { makeDevCerts } from '../dev-certs'
import { silentLogger } from '../log'
import { NodeMetrics } from '../metrics/node-metrics'
import type { GroupView, NodeView } from '../node-view'
import { HTTP_LIMITS, type HttpServer, type HttpTls, startHttpServer } from './http-server'
import { hostAllowed, isLoopback } from './loopback-host'

const servers: HttpServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

function fakeView(state: { failed: boolean; leader: string }): NodeView {
  const status = {
    role: Role.Leader,
    lead: 'n1',
    term: 3,
    commit: 7,
    applied: 7,
    lastIndex: 7,
  } as GroupView['status']
  return {
    nodeId: 'n1',
    serving: () => !state.failed,
    failed: () => state.failed,
    groups: () => [{ groupId: 0, status, imports: 2, sweeping: 1, logTail: { entries: 5, bytes: 420 } }],
    ledPartitions: () => [],
    metaLeaderId: () => state.leader,
  }
}

/**
 * A server on loopback with a console that answers 204 to every `/api/` path and records each
 * request it took (`METHOD path`).
 */
async function startWithConsole(): Promise<{ server: HttpServer; seen: string[] }> {
  const seen: string[] = []
  const server = await startHttpServer({
    listen: '127.0.0.1:0',
    metrics: new NodeMetrics('n1'),
    view: fakeView({ failed: false, leader: 'n1' }),
    log: silentLogger(),
    console: {
      handle: (req, res, path) => {
        if (!path.startsWith('/api/')) return false
        seen.push(`${req.method} ${path}`)
        res.writeHead(204).end()
        return true
      },
      close: async () => {},
    },
  })
  servers.push(server)
  return { server, seen }
}

async function start(view: NodeView): Promise<string> {
  const server = await startHttpServer({
    listen: '127.0.0.1:0',
    metrics: new NodeMetrics('n1'),
    view,
    log: silentLogger(),
  })
  servers.push(server)
  return `http://127.0.0.1:${server.port}`
}

describe('the operations HTTP server', () => {
  it('answers liveness, readiness with reasons, metrics, 404 and 405', async () => {
    const state = { failed: false, leader: '' }
    const base = await start(fakeView(state))
    expect((await fetch(`${base}/healthz`)).status).toBe(200)
    const notReady = await fetch(`${base}/readyz`)
    expect(notReady.status).toBe(503)
    expect(await notReady.text()).toMatch(/meta group leader is not known/)
    state.leader = 'n1'
    expect((await fetch(`${base}/readyz`)).status).toBe(200)
    const metrics = await fetch(`${base}/metrics`)
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain; version=0.0.4/)
    const text = await metrics.text()
    expect(text).toMatch(/^mq_raft_term\{group="0",node="n1"\} 3$/m)
    expect(text).toMatch(/^mq_data_imports\{group="0",node="n1"\} 2$/m)
    expect(text).toMatch(/^mq_data_sweeps\{group="0",node="n1"\} 1$/m)
    expect(text).toMatch(/^mq_raft_log_tail_entries\{group="0",node="n1"\} 5$/m)
    expect(text).toMatch(/^mq_raft_log_tail_bytes\{group="0",node="n1"\} 420$/m)
    expect((await fetch(`${base}/nope`)).status).toBe(404)
    expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(405)
    state.failed = true
    expect((await fetch(`${base}/healthz`)).status).toBe(503)
    expect((await fetch(`${base}/readyz`)).status).toBe(503)
  })

  it('answers a method it does not take 405 naming those it takes (Allow), on every path of its own', async () => {
    // RFC 9110 §15.5.6: a 405 must say what the resource takes (the console API's do since 2026-12-07).
    const base = await start(fakeView({ failed: false, leader: 'n1' }))
    for (const path of ['/metrics', '/healthz', '/readyz', '/nope']) {
      const r = await fetch(`${base}${path}`, { method: 'POST' })
      expect([path, r.status, r.headers.get('allow')]).toEqual([path, 405, 'GET, HEAD'])
    }
  })

  it('names the address when it cannot listen', async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const port = (taken.address() as { port: number }).port
    try {
      await expect(
        startHttpServer({
          listen: `127.0.0.1:${port}`,
          metrics: new NodeMetrics('n1'),
          view: fakeView({ failed: false, leader: 'n1' }),
          log: silentLogger(),
        }),
      ).rejects.toThrow(`cannot listen on 127.0.0.1:${port} (http)`)
    } finally {
      taken.close()
    }
  })

  it('hands the console its paths (any method) before its own, and keeps /metrics', async () => {
    const { server, seen } = await startWithConsole()
    const base = `http://127.0.0.1:${server.port}`
    expect((await fetch(`${base}/api/scale?x=1`, { method: 'POST' })).status).toBe(204)
    expect((await fetch(`${base}/metrics`)).status).toBe(200)
    const missing = await fetch(`${base}/nope`)
    expect([missing.status, await missing.text()]).toEqual([404, expect.stringContaining('/console/')])
    expect(seen).toEqual(['POST /api/scale'])
  })

  it('on loopback, answers only requests for a loopback host, on every path, before the console', async () => {
    const { server, seen } = await startWithConsole()
    const { port } = server
    const allowed = [
      'localhost',
      `localhost:${port}`,
      `127.0.0.1:${port}`,
      '127.0.0.2',
      `[::1]:${port}`,
      'LOCALHOST',
    ]
    for (const host of allowed)
      expect([host, await statusFor(port, '/api/session', host)]).toEqual([host, 204])
    const refused = [
      `attacker.example:${port}`,
      'attacker.example',
      `localhost.attacker.example:${port}`,
      `127.0.0.1.attacker.example:${port}`,
      'sub.localhost',
      '10.0.0.1',
      'localhost@attacker.example',
    ]
    for (const path of ['/api/session', '/metrics', '/healthz']) {
      for (const host of refused) expect([host, await statusFor(port, path, host)]).toEqual([host, 403])
    }
    expect(seen).toHaveLength(allowed.length)
    // HTTP/1.0 may leave the Host out (a browser never does).
    expect(await rawStatus(port, 'GET /healthz HTTP/1.0\r\n\r\n')).toBe(200)
  })

  it('on other addresses, answers any Host (names the node cannot know: ingress, service DNS)', async () => {
    const server = await startHttpServer({
      listen: '0.0.0.0:0',
      metrics: new NodeMetrics('n1'),
      view: fakeView({ failed: false, leader: 'n1' }),
      log: silentLogger(),
    })
    servers.push(server)
    expect(await statusFor(server.port, '/healthz', 'mq.example.com')).toBe(200)
    expect(await statusFor(server.port, '/healthz', `10.1.2.3:${server.port}`)).toBe(200)
  })

  it('with allowed hosts, answers only those (and loopback names) on any address, or any Host with *', async () => {
    const start = async (listen: string, allowedHosts: string[]) => {
      const server = await startHttpServer({
        listen,
        allowedHosts,
        metrics: new NodeMetrics('n1'),
        view: fakeView({ failed: false, leader: 'n1' }),
        log: silentLogger(),
      })
      servers.push(server)
      return server.port
    }
    const lan = await start('0.0.0.0:0', ['mq.example.com'])
    expect(await statusFor(lan, '/healthz', `mq.example.com:${lan}`)).toBe(200)
    expect(await statusFor(lan, '/healthz', `127.0.0.1:${lan}`)).toBe(200)
    expect(await statusFor(lan, '/metrics', 'rebound.example.org')).toBe(403)
    // A reverse proxy on the same host that passes the client's Host on to a loopback port.
    const proxied = await start('127.0.0.1:0', ['console.example.com'])
    expect(await statusFor(proxied, '/healthz', 'console.example.com')).toBe(200)
    expect(await statusFor(proxied, '/healthz', 'other.example.com')).toBe(403)
    const any = await start('127.0.0.1:0', ['*'])
    expect(await statusFor(any, '/healthz', 'other.example.com')).toBe(200)
  })

  it('survives connections the system would not accept (accept errors after the bind), and keeps answering', async () => {
    // Node reports a failed accept (EMFILE past libuv's reserve, ENOBUFS, a network error Linux
    // passes on) as an 'error' event of the listening server: with no listener left after the
    // bind (the listen's own was a once), the second one threw and took the process down.
    const listen = vi.spyOn(NetServer.prototype, 'listen')
    let server: HttpServer
    let bound: NetServer
    try {
      server = await startHttpServer({
        listen: '127.0.0.1:0',
        metrics: new NodeMetrics('n1'),
        view: fakeView({ failed: false, leader: 'n1' }),
        log: silentLogger(),
      })
      bound = listen.mock.contexts[0] as NetServer
    } finally {
      listen.mockRestore()
    }
    servers.push(server)
    const acceptFailed = () =>
      Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', errno: -24, syscall: 'accept' })
    for (let i = 0; i < 3; i++) expect(() => bound.emit('error', acceptFailed())).not.toThrow()
    expect((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status).toBe(200)
  })

  it('keeps answering probes while one host holds sockets that send nothing, and closes them', async () => {
    const server = await startHttpServer({
      listen: '127.0.0.1:0',
      metrics: new NodeMetrics('n1'),
      view: fakeView({ failed: false, leader: 'n1' }),
      log: silentLogger(),
      limits: { ...HTTP_LIMITS, connectionsPerAddressMax: 4, headersTimeoutMs: 400, checkEveryMs: 100 },
    })
    servers.push(server)
    const open = (localAddress: string) =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port: server.port, localAddress }, () => resolve(s))
        s.once('error', reject)
        s.resume() // reads what the server sends (a 408) and its end
      })
    const closed = (s: Socket) => new Promise<number>((resolve) => s.once('close', () => resolve(Date.now())))
    const idle = await Promise.all(Array.from({ length: 4 }, () => open('127.0.0.1')))
    const closes = idle.map(closed)
    // The fifth socket of the same host is closed at once; another host's probe is answered.
    const fifth = await open('127.0.0.1')
    await closed(fifth)
    const status = await new Promise<number>((resolve, reject) => {
      get({ host: '127.0.0.1', port: server.port, path: '/healthz', localAddress: '127.0.0.2' }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      }).once('error', reject)
    })
    expect(status).toBe(200)
    // The idle ones are closed once their headers are late (before, Node's 60 s).
    const started = Date.now()
    const at = await Promise.all(closes)
    expect(Math.max(...at) - started).toBeLessThan(5_000)
  })

  it('renders a bounded number of scrapes at once, however many one connection pipelines', async () => {
    let release = () => {}
    const held = new Promise<void>((r) => (release = r))
    const renders = { running: 0, runningMax: 0 }
    const metrics = {
      contentType: 'text/plain; version=0.0.4; charset=utf-8',
      render: async () => {
        renders.running++
        renders.runningMax = Math.max(renders.runningMax, renders.running)
        await held
        renders.running--
        return 'mq_up 1\n'
      },
    } as unknown as NodeMetrics
    let requests = 0
    const server = await startHttpServer({
      listen: '127.0.0.1:0',
      metrics,
      view: fakeView({ failed: false, leader: 'n1' }),
      log: silentLogger(),
      console: {
        handle: () => {
          requests++
          return false
        },
        close: async () => {},
      },
    })
    servers.push(server)
    // One write of 100 requests (~4 KB): each used to render its own copy of the scrape at once
    // (some 11 MB on a node leading 1,000 partitions).
    const total = 100
    let answer = ''
    const socket = connect({ host: '127.0.0.1', port: server.port }, () =>
      socket.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(total)),
    )
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      answer += chunk
    })
    await vi.waitFor(() => expect(requests).toBe(total), { timeout: 5_000 })
    expect(renders.runningMax).toBeLessThanOrEqual(HTTP_LIMITS.scrapesMax)
    release()
    await vi.waitFor(() => expect(answer.match(/^HTTP\/1\.1 \d{3}/gm)).toHaveLength(total), {
      timeout: 5_000,
    })
    socket.destroy()
    const statuses = (answer.match(/^HTTP\/1\.1 \d{3}/gm) ?? []).map((line) => line.slice(-3))
    expect(statuses.filter((s) => s === '200')).toHaveLength(HTTP_LIMITS.scrapesMax)
    expect(statuses.filter((s) => s === '429')).toHaveLength(total - HTTP_LIMITS.scrapesMax)
    expect(answer).toMatch(/scrapes of \/metrics/)
  })
})

describe('the operations HTTP server with --http-tls', () => {
  /** A dev CA and node certificate in a fresh folder: [ca, cert, key]. */
  function devCerts(root: string, name: string): [Buffer, Buffer, Buffer] {
    const p = makeDevCerts({ dir: join(root, name), hosts: [], days: 2, force: false })
    return [readFileSync(p.caCert), readFileSync(p.nodeCert), readFileSync(p.nodeKey)]
  }

  /** GET `path` over HTTPS trusting `ca`: [status, body], or the error's message. */
  function fetchTls(port: number, path: string, ca: Buffer): Promise<[number, string] | string> {
    return new Promise((resolve) => {
      const req = getHttps(
        { host: '127.0.0.1', port, path, ca, servername: 'localhost', agent: false },
        (res) => {
          let body = ''
          res.on('data', (c) => {
            body += c
          })
          res.on('end', () => resolve([res.statusCode ?? 0, body]))
        },
      )
      req.on('error', (e) => resolve(e.message))
    })
  }

  it('answers over HTTPS with the node certificate, refuses plaintext, and presents a reloaded one to new connections', async () => {
    const root = mkdtempSync(join(tmpdir(), 'http-tls-'))
    try {
      const [ca, cert, key] = devCerts(root, 'a')
      const [ca2, cert2, key2] = devCerts(root, 'b')
      let identity = { cert, key }
      const listeners: ((id: { cert: Buffer; key: Buffer }) => void)[] = []
      const tls: HttpTls = { identity: () => identity, onReload: (l) => listeners.push(l) }
      const server = await startHttpServer({
        listen: '127.0.0.1:0',
        metrics: new NodeMetrics('n1'),
        view: fakeView({ failed: false, leader: 'n1' }),
        log: silentLogger(),
        tls,
      })
      servers.push(server)
      expect(await fetchTls(server.port, '/healthz', ca)).toEqual([200, 'ok\n'])
      const plain = await new Promise<string>((resolve) => {
        const req = get({ host: '127.0.0.1', port: server.port, path: '/healthz' }, (res) =>
          resolve(`answered ${res.statusCode}`),
        )
        req.on('error', (e) => resolve(e.message))
      })
      expect(plain).not.toMatch(/answered 200/)
      // A rotation: certificates of another CA from now on.
      identity = { cert: cert2, key: key2 }
      for (const l of listeners) l(identity)
      expect(await fetchTls(server.port, '/healthz', ca2)).toEqual([200, 'ok\n'])
      expect(await fetchTls(server.port, '/healthz', ca)).toMatch(/self.signed|unable to verify|certificate/i)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

describe('the operations HTTP server with --http-tls, against silent sockets', () => {
  it('closes a socket that never starts its handshake once the headers are late', async () => {
    const root = mkdtempSync(join(tmpdir(), 'http-tls-'))
    try {
      const p = makeDevCerts({ dir: root, hosts: [], days: 2, force: false })
      const identity = { cert: readFileSync(p.nodeCert), key: readFileSync(p.nodeKey) }
      const server = await startHttpServer({
        listen: '127.0.0.1:0',
        metrics: new NodeMetrics('n1'),
        view: fakeView({ failed: false, leader: 'n1' }),
        log: silentLogger(),
        limits: { ...HTTP_LIMITS, headersTimeoutMs: 400, checkEveryMs: 100 },
        tls: { identity: () => identity, onReload: () => {} },
      })
      servers.push(server)
      const started = Date.now()
      const closedAt = await new Promise<number>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port: server.port })
        s.once('error', reject)
        s.once('close', () => resolve(Date.now()))
      })
      // Node's default handshakeTimeout held it 120 s.
      expect(closedAt - started).toBeLessThan(5_000)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

describe('loopback hosts', () => {
  it('knows the loopback listen addresses', () => {
    for (const host of [
      '127.0.0.1',
      '127.1.2.3',
      '::1',
      '0:0:0:0:0:0:0:1',
      '::ffff:127.0.0.1',
      'localhost',
      'LocalHost',
      // Spellings the resolver reads as 127.0.0.1 (inet_aton), and binds a listener to.
      '127.1',
      '0x7f.0.0.1',
      '0177.0.0.1',
      '2130706433',
    ])
      expect([host, isLoopback(host)]).toEqual([host, true])
    for (const host of [
      '0.0.0.0',
      '::',
      '',
      '10.0.0.1',
      '::ffff:10.0.0.1',
      'example.com',
      'localhost.',
      '10.1',
      '128.1',
      '0x7f0.1',
      '4278190081',
      '127.0.0.1.1',
    ])
      expect([host, isLoopback(host)]).toEqual([host, false])
  })

  it('checks the Host on a loopback listen address spelt as the resolver reads it (127.1)', async () => {
    const server = await startHttpServer({
      listen: '127.1:0',
      metrics: new NodeMetrics('n1'),
      view: fakeView({ failed: false, leader: 'n1' }),
      log: silentLogger(),
    })
    servers.push(server)
    expect(await statusFor(server.port, '/healthz', `127.0.0.1:${server.port}`)).toBe(200)
    expect(await statusFor(server.port, '/metrics', `attacker.example:${server.port}`)).toBe(403)
  })

  it('checks the Host on a listen name the resolver maps to loopback (the host name in /etc/hosts)', async () => {
    // Debian's /etc/hosts maps the machine's own name to 127.0.1.1 (RHEL's has localhost4,
    // localhost.localdomain): such a port listens on loopback only, and a page that rebinds its
    // name to 127.0.1.1 read it as its own origin, since only the listen text was checked.
    const lookup = dns.lookup
    const patched = ((name: string, ...rest: unknown[]) => {
      const callback = rest[rest.length - 1] as (e: null, address: string, family: number) => void
      if (name === 'mq-box.test') return void process.nextTick(() => callback(null, '127.0.1.1', 4))
      return (lookup as (...a: unknown[]) => void)(name, ...rest)
    }) as typeof dns.lookup
    dns.lookup = patched
    let server: HttpServer
    try {
      server = await startHttpServer({
        listen: 'mq-box.test:0',
        metrics: new NodeMetrics('n1'),
        view: fakeView({ failed: false, leader: 'n1' }),
        log: silentLogger(),
      })
    } finally {
      dns.lookup = lookup
    }
    servers.push(server)
    const status = (path: string, host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.1.1', port: server.port, path, headers: { host } }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.once('error', reject)
        req.end()
      })
    expect(await status('/metrics', `attacker.example:${server.port}`)).toBe(403)
    // The name it was told to listen on, and loopback names, are answered (the URL it prints).
    expect(await status('/healthz', `mq-box.test:${server.port}`)).toBe(200)
    expect(await status('/healthz', `127.0.1.1:${server.port}`)).toBe(200)
    expect(await status('/healthz', 'localhost')).toBe(200)
  })

  it('allows a Host header of localhost or a loopback address with any port, or none', () => {
    for (const host of [undefined, 'localhost', 'localhost:80', '127.0.0.1:9101', '[::1]:9101', '[::1]'])
      expect([host, hostAllowed(host)]).toEqual([host, true])
    for (const host of ['', 'evil.test', '::1', '[::1', 'localhost:x', 'localhost:9101/x', '[10::1]:80'])
      expect([host, hostAllowed(host)]).toEqual([host, false])
  })

  it('allows the names given besides loopback ones, case-insensitively, or any with *', () => {
    const allowed = ['mq.example.com', 'fe80::1']
    for (const host of ['MQ.example.com', 'mq.example.com:443', '[fe80::1]:9101', 'localhost', undefined])
      expect([host, hostAllowed(host, allowed)]).toEqual([host, true])
    for (const host of ['example.com', 'mq.example.com.evil.test', '[fe80::2]', 'fe80::1'])
      expect([host, hostAllowed(host, allowed)]).toEqual([host, false])
    expect(hostAllowed('anything.test:1', ['*'])).toBe(true)
  })
})

/** The status of a GET of `path` sent with Host `host`. */
function statusFor(port: number, path: string, host: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.once('error', reject)
    req.end()
  })
}

/** The status line's code of the answer to `text`, sent as is. */
function rawStatus(port: number, text: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let answer = ''
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(text))
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      answer += chunk
    })
    socket.once('end', () => resolve(Number(/^HTTP\/1\.\d (\d{3})/.exec(answer)?.[1] ?? 0)))
    socket.once('error', reject)
  })
}
