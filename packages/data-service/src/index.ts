export type { PartitionRef } from './partition-key'
export { parsePartitionId, partitionId } from './partition-key'
