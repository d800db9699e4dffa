import { turboBuild } from '../../turbo-build.ts'

/** The suite's global setup: the binary's tests run the built `mq` (test/binary.test.ts). */
export function setup(): void {
  turboBuild(['@mq/cli...'])
}
