export { Prng } from './prng'
