export type { ClusterOptions, NodeProcess } from './cluster'
export { freePort, LocalCluster, serverBuildChangedSince, waitServing } from './cluster'
