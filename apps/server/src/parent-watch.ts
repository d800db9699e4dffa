/**
 * Set to `1` in the environment of a process started with an IPC channel (`mq-server dev`
 * starts its nodes so) to have it stop once its parent is gone: see watchParent.
 */
export const EXIT_WITH_PARENT_ENV = 'MQ_EXIT_WITH_PARENT'

/** The parts of `process` watchParent uses. */
export interface ParentLink {
  readonly env: NodeJS.ProcessEnv
  readonly connected: boolean
  readonly channel?: { unref(): void } | undefined
  once(event: 'disconnect', listener: () => void): unknown
}

/**
 * Calls `onGone` once when the process that started this one goes away, however it ended
 * (SIGKILL included: the kernel closes its end of the IPC channel, and this end sees it),
 * so that a supervisor killed outright leaves no node running on its own. Only with
 * EXIT_WITH_PARENT_ENV=1 and an IPC channel; otherwise (a node started by hand, by systemd,
 * by a process manager that did not ask for it) nothing. The channel no longer keeps the
 * process alive. Returns whether it watches.
 */
export function watchParent(onGone: () => void, link: ParentLink = process): boolean {
  if (link.env[EXIT_WITH_PARENT_ENV] !== '1' || link.channel === undefined) return false
  link.channel.unref()
  if (!link.connected) {
    // Gone before this process looked: no disconnect event will come.
    queueMicrotask(onGone)
    return true
  }
  link.once('disconnect', onGone)
  return true
}
