export type { Member } from './members'
export { parseAddress, parseMembers } from './members'
export type { ProgramIo } from './program'
export { createProgram } from './program'
