import { turboBuild } from '../../turbo-build.ts'

/** The suite's global setup: the process tests run the built server (test/processes.ts). */
export function setup(): void {
  turboBuild(['@mq/server...'])
}
