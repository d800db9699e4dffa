import { buildConfig } from '../../tsup.shared.ts'

export default buildConfig()
