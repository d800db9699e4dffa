#!/usr/bin/env -S node --max-semi-space-size=32 --initial-old-space-size=256
import { runProgram } from './program'

// `mq-server start --help | head -1`: a reader that left is no crash (an unhandled EPIPE printed
// a stack trace and exited 1). --help and --version then just end; `mq-server dev | head`
// stops its cluster as on SIGTERM (it crashed, its nodes left to stop on their own).
let readerGone = false
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error
  if (readerGone) return
  readerGone = true
  process.emit('SIGTERM', 'SIGTERM')
})

await runProgram(process.argv)
