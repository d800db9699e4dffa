import { turboBuild } from '../../turbo-build.ts'

/**
 * Builds mq-server and mq, and the packages they use: the suite (this is its global setup)
 * and the faults and scale scripts run the built commands (src/built.ts), as users do, each
 * process started without a TypeScript loader (under tsx a node took ~1 s more CPU to start,
 * ~3 s more per 3-node cluster on 2 cores).
 */
export function buildApps(): void {
  turboBuild(['@mq/server...', '@mq/cli...'])
}

export const setup = buildApps
