import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ClassicLevel } from 'classic-level'

const dir = mkdtempSync(join(tmpdir(), 'probe-'))
const o = { keyEncoding: 'view', valueEncoding: 'view' }
const a = new ClassicLevel(join(dir, 'db'), o)
await a.open()
await a
  .batch([{ type: 'put', key: new Uint8Array([]), value: new Uint8Array([1]) }])
  .catch((e) => console.log('emptykey', e.code, e.message))
console.log(await a.get(new Uint8Array([9])))
const b = new ClassicLevel(join(dir, 'db'), o)
try {
  await b.open()
} catch (e) {
  console.log('locked:', e.code, e.message, '| cause:', e.cause?.code, e.cause?.message)
}
await a.close()
console.log(readdirSync(join(dir, 'db')))
writeFileSync(join(dir, 'db', 'CURRENT'), 'garbage')
const c = new ClassicLevel(join(dir, 'db'), o)
try {
  await c.open()
} catch (e) {
  console.log('corrupt:', e.code, e.message, '| cause:', e.cause?.code, e.cause?.message)
}
writeFileSync(join(dir, 'db', 'CURRENT'), 'MANIFEST-000002\n')
for (const f of readdirSync(join(dir, 'db')))
  if (f.startsWith('MANIFEST')) writeFileSync(join(dir, 'db', f), 'garbage garbage garbage garbage')
const d = new ClassicLevel(join(dir, 'db'), o)
try {
  await d.open()
} catch (e) {
  console.log('manifest:', e.code, e.message, '| cause:', e.cause?.code, e.cause?.message)
}
const f = new ClassicLevel('/proc/nonexist/db', o)
try {
  await f.open()
} catch (e) {
  console.log('proc:', e.code, e.message, '| cause:', e.cause?.code, e.cause?.message)
}
const g = new ClassicLevel(join(dir, 'db', 'CURRENT', 'x'), o)
try {
  await g.open()
} catch (e) {
  console.log('notdir:', e.code, e.message, '| cause:', e.cause?.code, e.cause?.message)
}
const h = new ClassicLevel(join(dir, 'nodb'), o)
try {
  await h.open({ createIfMissing: false })
} catch (e) {
  console.log('missing:', e.code, e.message, '| cause:', e.cause?.code, e.cause?.message)
}
