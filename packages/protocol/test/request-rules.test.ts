import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FieldKind, type MessageRule } from '../src/request-guard'
import { META_REQUEST_RULES, QUEUE_REQUEST_RULES } from '../src/request-rules'

// The guard's rules against the .proto files as buf compiles them: a field added to a request
// (or a message it holds) and not to its rule would be decoded unchecked, so it fails here.

interface FieldDescriptor {
  readonly name: string
  readonly number: number
  readonly label: string
  readonly type: string
  readonly typeName?: string
}
interface MessageDescriptor {
  readonly name: string
  readonly field?: FieldDescriptor[]
  readonly nestedType?: MessageDescriptor[]
  readonly options?: { readonly mapEntry?: boolean }
}
interface FileDescriptor {
  readonly package: string
  readonly messageType?: MessageDescriptor[]
  readonly service?: { name: string; method: { name: string; inputType: string }[] }[]
}

const packageDir = join(import.meta.dirname, '..')
const files: FileDescriptor[] = JSON.parse(
  execFileSync(join(packageDir, 'node_modules', '.bin', 'buf'), ['build', '-o', '-#format=json'], {
    cwd: packageDir,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  }),
).file

/** Every message by its full name (".mq.v1.ProduceMessage.HeadersEntry"), with its name in rules. */
const messages = new Map<string, { readonly descriptor: MessageDescriptor; readonly ruleName: string }>()
function index(prefix: string, ruleName: string, m: MessageDescriptor): void {
  const full = `${prefix}.${m.name}`
  const name = ruleName ? `${ruleName}.${m.name}` : m.name
  messages.set(full, { descriptor: m, ruleName: name })
  for (const n of m.nestedType ?? []) index(full, name, n)
}
for (const f of files) for (const m of f.messageType ?? []) index(`.${f.package}`, '', m)

const VARINT_TYPES = new Set(['TYPE_UINT32', 'TYPE_INT32', 'TYPE_BOOL', 'TYPE_ENUM'])

/** The rule `descriptor` calls for, as plain data; throws on a type the guard has no kind for. */
function expectedRule(fullName: string): unknown {
  const m = messages.get(fullName)
  if (!m) throw new Error(`no message ${fullName}`)
  return {
    name: m.ruleName,
    fields: (m.descriptor.field ?? []).map((f) => {
      const repeated = f.label === 'LABEL_REPEATED'
      const nested = f.typeName ? messages.get(f.typeName) : undefined
      let kind: FieldKind
      if (f.type === 'TYPE_STRING') kind = FieldKind.String
      else if (f.type === 'TYPE_BYTES') kind = FieldKind.Bytes
      else if (f.type === 'TYPE_UINT64') kind = FieldKind.Uint64
      else if (VARINT_TYPES.has(f.type)) kind = FieldKind.Varint
      else if (f.type === 'TYPE_MESSAGE')
        kind = nested?.descriptor.options?.mapEntry ? FieldKind.Map : FieldKind.Message
      else throw new Error(`${m.ruleName}.${f.name}: ${f.type} has no kind in request-guard (add one)`)
      return {
        number: f.number,
        name: f.name,
        kind,
        repeated,
        message:
          kind === FieldKind.Message || kind === FieldKind.Map
            ? expectedRule(f.typeName as string)
            : undefined,
      }
    }),
  }
}

function actualRule(rule: MessageRule): unknown {
  return {
    name: rule.name,
    fields: [...rule.fields]
      .sort((a, b) => a.number - b.number)
      .map((f) => ({
        number: f.number,
        name: f.name,
        kind: f.kind,
        repeated: f.max > 0,
        message: f.message ? actualRule(f.message) : undefined,
      })),
  }
}

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1)

describe('request rules', () => {
  it.each([
    ['mq.v1.Queue', QUEUE_REQUEST_RULES as Record<string, MessageRule>],
    ['mq.v1.Meta', META_REQUEST_RULES as Record<string, MessageRule>],
  ])('%s: every method has a rule that matches its request message, field by field', (serviceName, rules) => {
    const [pkg, name] = [
      serviceName.slice(0, serviceName.lastIndexOf('.')),
      serviceName.slice(serviceName.lastIndexOf('.') + 1),
    ]
    const service = files
      .filter((f) => f.package === pkg)
      .flatMap((f) => f.service ?? [])
      .find((s) => s.name === name)
    expect(service).toBeDefined()
    const methods = service?.method ?? []
    expect(Object.keys(rules).sort()).toEqual(methods.map((m) => lowerFirst(m.name)).sort())
    for (const m of methods) {
      const rule = rules[lowerFirst(m.name)] as MessageRule
      expect(actualRule(rule), `${name}.${m.name}`).toEqual(expectedRule(m.inputType))
    }
  })

  it('bounds every repeated field and map of every request', () => {
    const unbounded: string[] = []
    const visit = (rule: MessageRule) => {
      for (const f of rule.fields) {
        if (f.max > 0 && !(f.max >= 1 && Number.isInteger(f.max) && f.what))
          unbounded.push(`${rule.name}.${f.name}`)
        if (f.message) visit(f.message)
      }
    }
    for (const rule of [...Object.values(QUEUE_REQUEST_RULES), ...Object.values(META_REQUEST_RULES)])
      visit(rule)
    expect(unbounded).toEqual([])
  })
})
