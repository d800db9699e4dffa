// A Peer server in a process of its own (a test can SIGSTOP it: a peer that stops reading at
// the TCP level): it reads and drops every Raft batch, and prints "PORT <port>" once bound.
import { Server, ServerCredentials } from '@grpc/grpc-js'
import { PeerService } from '@mq/protocol'

const server = new Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 })
server.addService(PeerService, {
  raft: (stream: NodeJS.EventEmitter, cb: (e: null, r: object) => void) => {
    stream.on('data', () => {})
    stream.on('end', () => cb(null, {}))
  },
  heartbeat: (_: unknown, cb: (e: null, r: object) => void) => cb(null, {}),
})
server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error
  console.log(`PORT ${port}`)
})
