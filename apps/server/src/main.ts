#!/usr/bin/env -S node --max-semi-space-size=32 --initial-old-space-size=256
import { runProgram } from './program'

await runProgram(process.argv)
