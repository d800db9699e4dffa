/**
 * For tests: spins until this process has used `ms` more of CPU time (not wall time: on a
 * loaded machine the process is descheduled part of it), for at most 10 s of wall time.
 */
export function spinCpu(ms: number): void {
  const start = process.cpuUsage()
  const until = performance.now() + 10_000
  for (;;) {
    const used = process.cpuUsage(start)
    if ((used.user + used.system) / 1000 >= ms || performance.now() > until) return
  }
}
