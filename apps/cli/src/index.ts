export { createProgram } from './program'
