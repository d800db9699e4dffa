export { fnv1a32, Partitioner } from './partitioner'
