export type { ClusterOptions, NodeProcess } from './cluster'
export { freePort, LocalCluster, serverSourceChangedSince, waitServing } from './cluster'
