/**
 * The V8 heap flags every `mq-server` process runs with (its bin's shebang carries the same;
 * launchers that start it with `node main.js` pass these first). A server allocates mostly
 * short-lived objects (decoded requests, Raft entries, LevelDB keys and values) at a high rate
 * and keeps a small heap (15-40 MB live). With V8's defaults its old generation starts small,
 * so the objects that outlive a young-generation collection while a write or a reply is under
 * way trigger a full mark-compact every ~0.2 s under load (17-46 per node in a 10 s run),
 * each with helper threads marking in parallel on a 2-core machine shared by three nodes.
 * Starting the old generation at 256 MiB and letting the young one grow to 32 MiB per
 * semi-space leaves those collections to the young generation: 0 mark-compacts in the same
 * run, and 3 nodes on loopback went from 33.5-36.7 to 27.3-28.2 µs of server CPU per produced
 * message and from 63.5-67.9 to 57.1 µs per consumed one (alternated runs, 300,000 messages).
 * The cost is memory: a node's resident size peaked at 320-520 MB instead of ~265 MB.
 */
export const SERVER_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=32',
  '--initial-old-space-size=256',
]
