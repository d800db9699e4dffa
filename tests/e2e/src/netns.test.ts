import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NetNamespaces } from './netns'

/** Runs a one-line TCP client in `from`'s namespace; resolves 'ok', or the error / 'timeout'. */
function probe(net: NetNamespaces, from: string, address: string, port: number): Promise<string> {
  const script = `const s=require('net').connect(${port},'${address}');s.setTimeout(1500,()=>{console.log('timeout');process.exit(0)});s.on('data',()=>{console.log('ok');process.exit(0)});s.on('error',e=>{console.log(e.code);process.exit(0)})`
  return new Promise((resolve, reject) =>
    execFile(
      'ip',
      [...net.execPrefix(from), process.execPath, '-e', script],
      { timeout: 10_000 },
      (e, out) => (e ? reject(e) : resolve(out.trim())),
    ),
  )
}

// Partitions made with blackhole routes between namespaces (needs root, else not collected):
// a cut stops a node's packets to one other node, the test process reaches both all along.
describe.runIf(NetNamespaces.usable())('NetNamespaces', () => {
  let net: NetNamespaces
  let server: ChildProcess
  let b = ''
  const port = 7000

  beforeAll(async () => {
    net = NetNamespaces.create()
    net.add('a', 1)
    b = net.add('b', 2)
    net.add('c', 3)
    const script = `require('net').createServer(s=>s.end('hi')).listen(${port},'${b}',()=>console.log('up'))`
    server = spawn('ip', [...net.execPrefix('b'), process.execPath, '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    await once(server.stdout as NodeJS.ReadableStream, 'data')
  })

  afterAll(() => {
    server?.kill('SIGKILL')
    net?.destroy()
  })

  it('cuts one pair of nodes, leaves the others, and heals', async () => {
    expect(await probe(net, 'a', b, port)).toBe('ok')
    net.partition([['a'], ['b']])
    expect(net.cuts).toEqual(['a>b', 'b>a'])
    expect(await probe(net, 'a', b, port)).not.toBe('ok')
    // c is in no side: a bridge that still reaches b.
    expect(await probe(net, 'c', b, port)).toBe('ok')
    net.healAll()
    expect(net.cuts).toEqual([])
    expect(await probe(net, 'a', b, port)).toBe('ok')
  })

  it('cuts one way: b cannot answer a, so a cannot connect either', async () => {
    net.cut('b', 'a')
    expect(await probe(net, 'a', b, port)).toBe('timeout')
    expect(await probe(net, 'c', b, port)).toBe('ok')
    net.healAll()
  })
})
