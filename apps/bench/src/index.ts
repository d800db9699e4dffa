export type { Percentiles } from './percentiles'
export { percentiles } from './percentiles'
export type { ProgramIo } from './program'
export { createProgram } from './program'
