import { buildConfig } from '../../tsup.shared.ts'

export default buildConfig(['src/index.ts', 'src/main.ts'])
