import { SimCluster, type SimResult } from './cluster'

/** Runs seeds [first, first + count) and returns the results; throws SimFailure on the first failure. */
export function runSeeds(first: number, count: number, onResult?: (r: SimResult) => void): SimResult[] {
  const results: SimResult[] = []
  for (let s = first; s < first + count; s++) {
    const r = new SimCluster(s).run()
    results.push(r)
    onResult?.(r)
  }
  return results
}
