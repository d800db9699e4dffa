#!/usr/bin/env node
// Checks that the workspace's dependency graph points only the way ARCHITECTURE.md draws it:
// each @mq package depends only on the packages listed for it below, nothing depends on an
// app, there are no cycles, every @mq import in source is declared in package.json, and no
// source file deep-imports another package (`@mq/x/...`) or reaches outside its own folder.
// Exits 1 and lists every violation.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** The allowed @mq dependencies of each workspace member (ARCHITECTURE.md, "Packages"). */
const ALLOWED = {
  '@mq/raft-core': [],
  '@mq/kv-storage': ['@mq/raft-core'],
  '@mq/weighted-queue': ['@mq/kv-storage', '@mq/raft-core'],
  '@mq/protocol': [],
  '@mq/meta-service': ['@mq/raft-core', '@mq/kv-storage', '@mq/protocol'],
  '@mq/data-service': ['@mq/raft-core', '@mq/kv-storage', '@mq/weighted-queue', '@mq/protocol'],
  '@mq/router-client': ['@mq/protocol'],
  // The web console's page and the types of its JSON API; it imports nothing of mq.
  '@mq/console': [],
  // The server's console API calls the cluster through the SDK, as any client would
  // (router-client sits above the apps in ARCHITECTURE.md's list, so the arrow points down).
  '@mq/server': [
    '@mq/raft-core',
    '@mq/kv-storage',
    '@mq/weighted-queue',
    '@mq/protocol',
    '@mq/meta-service',
    '@mq/data-service',
    '@mq/router-client',
    '@mq/console',
  ],
  '@mq/cli': ['@mq/router-client', '@mq/protocol'],
  '@mq/bench': ['@mq/router-client', '@mq/protocol', '@mq/raft-core', '@mq/kv-storage', '@mq/weighted-queue'],
  // End-to-end tests sit below everything: they drive the apps' processes through the SDK,
  // and damage a node's data files knowing their format (kv-storage's walRecords).
  '@mq/e2e': ['@mq/router-client', '@mq/protocol', '@mq/kv-storage'],
}
const APPS = new Set(['@mq/server', '@mq/cli', '@mq/bench', '@mq/e2e'])

const problems = []
const members = []
for (const area of ['packages', 'apps', 'tests']) {
  for (const name of readdirSync(join(root, area))) {
    const dir = join(root, area, name)
    const pkgPath = join(dir, 'package.json')
    try {
      statSync(pkgPath)
    } catch {
      continue
    }
    const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'))
    members.push({ dir, pkg })
  }
}

const graph = new Map()
for (const { dir, pkg } of members) {
  const name = pkg.name
  const allowed = ALLOWED[name]
  if (!allowed) {
    problems.push(
      `${name}: not in the allowed graph of scripts/check-deps.mjs (add it there, per ARCHITECTURE.md)`,
    )
    continue
  }
  const declared = Object.keys({
    ...pkg.dependencies,
    ...pkg.devDependencies,
    ...pkg.peerDependencies,
  }).filter((d) => d.startsWith('@mq/'))
  graph.set(name, declared)
  for (const dep of declared) {
    if (APPS.has(dep)) problems.push(`${name}: depends on the app ${dep}; nothing may depend on an app`)
    else if (!allowed.includes(dep))
      problems.push(`${name}: depends on ${dep}, which ARCHITECTURE.md does not allow`)
  }
  const runtime = new Set(Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies }))
  const bundles = /\btsup\b/.test(pkg.scripts?.build ?? '')
  const devOnly = new Set(Object.keys(pkg.devDependencies ?? {}).filter((d) => bundles && !runtime.has(d)))
  for (const file of sourceFiles(dir)) {
    const text = readFileSync(file, 'utf8')
    const rel = relative(root, file)
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      const spec = m[1]
      // tsup bundles what is not a dependency: a devDependency imported by built code ends up
      // inside dist/ (grpc-js bundled into the CLI failed at its first line).
      const bare = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]
      if (
        devOnly.has(bare) &&
        isBuiltSource(dir, file) &&
        !/^(?:import|export)\s+type\b/.test(statementOf(text, m))
      ) {
        problems.push(`${rel}: imports ${bare}, only a devDependency of ${name}: declare it in dependencies`)
      }
      if (spec.startsWith('@mq/')) {
        const [scope, base, ...rest] = spec.split('/')
        const target = `${scope}/${base}`
        if (rest.length > 0) problems.push(`${rel}: deep import ${spec}; import ${target} instead`)
        if (target !== name && !declared.includes(target)) {
          problems.push(`${rel}: imports ${target}, which ${name}'s package.json does not declare`)
        }
      } else if (spec.startsWith('.')) {
        const abs = resolve(dirname(file), spec)
        if (!abs.startsWith(dir + '/')) problems.push(`${rel}: relative import ${spec} leaves the package`)
      }
    }
  }
}

// Cycle check (depth-first search with colours).
const colour = new Map()
const visit = (node, path) => {
  if (colour.get(node) === 'grey') {
    problems.push(`dependency cycle: ${[...path, node].join(' -> ')}`)
    return
  }
  if (colour.get(node) === 'black') return
  colour.set(node, 'grey')
  for (const next of graph.get(node) ?? []) visit(next, [...path, node])
  colour.set(node, 'black')
}
for (const node of graph.keys()) visit(node, [])

if (problems.length > 0) {
  console.error(`check-deps: ${problems.length} problem(s):\n  ${problems.join('\n  ')}`)
  process.exit(1)
}
console.log(`check-deps: ${members.length} workspace members, dependency graph as ARCHITECTURE.md draws it`)

/** A file under src/ that is no test: the build may take it in. */
function isBuiltSource(dir, file) {
  const rel = relative(dir, file)
  return rel.startsWith('src/') && !/\.test\.[cm]?[jt]sx?$/.test(rel) && !rel.includes('/test/')
}

/**
 * The text from the first line of the statement `m` matched in: for a `from` clause, the import
 * or export it ends, which may start lines above (`import type {` with a name a line); else the
 * line holding it.
 */
function statementOf(text, m) {
  let start = text.lastIndexOf('\n', m.index) + 1
  if (m[0].startsWith('from')) {
    for (const s of text.slice(0, m.index).matchAll(/^(?:import|export)\b/gm)) start = s.index
  }
  return text.slice(start, m.index)
}

function* sourceFiles(dir) {
  for (const sub of ['src', 'test']) {
    yield* walk(join(dir, sub))
  }
}
function* walk(dir) {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return
  }
  for (const e of entries) {
    const p = join(dir, e.name)
    if (e.isDirectory()) {
      if (e.name !== 'generated' && e.name !== 'node_modules') yield* walk(p)
    } else if (/\.(ts|tsx|mts|js|mjs)$/.test(e.name)) yield p
  }
}
