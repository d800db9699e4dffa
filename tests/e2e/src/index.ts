export type { ClusterOptions, NodeProcess } from './cluster'
export { freePort, LocalCluster, waitServing } from './cluster'
