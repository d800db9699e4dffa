/**
 * Child process of the bad-input test: opens the database at argv[2], prints `open`, and
 * keeps it open (holding LevelDB's LOCK) until its parent kills it.
 */
import { LevelEngine } from '../src/level-engine'

const path = process.argv[2]
if (!path) throw new Error('usage: hold-open <db path>')
const engine = await LevelEngine.open(path)
process.stdout.write('open\n')
// Keep the event loop (and the lock) alive until killed; the parent ends this process.
const keepAlive = setInterval(() => {}, 60_000)
process.on('SIGTERM', () => {
  clearInterval(keepAlive)
  void engine.close().then(() => process.exit(0))
})
