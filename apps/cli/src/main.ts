#!/usr/bin/env node
import { createRequire } from 'node:module'
import { createProgram } from './program'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }
await createProgram(version).parseAsync(process.argv)
