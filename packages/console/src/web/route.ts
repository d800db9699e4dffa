/** The views of the page. */
export type Route =
  | { readonly view: 'cluster' }
  | { readonly view: 'groups' }
  | { readonly view: 'queues' }
  | { readonly view: 'queue'; readonly name: string }

/**
 * The view a location hash names: `#/groups`, `#/queues`, `#/queues/NAME` (NAME
 * percent-encoded), else the cluster. A NAME that is not valid percent-encoding (a link cut
 * short or edited by hand) gives the queues view: decoding it throws, and a throw here
 * stopped the page's polling.
 */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/')
  if (parts[0] === 'groups') return { view: 'groups' }
  if (parts[0] === 'queues' && parts[1]) {
    try {
      return { view: 'queue', name: decodeURIComponent(parts[1]) }
    } catch {
      return { view: 'queues' }
    }
  }
  if (parts[0] === 'queues') return { view: 'queues' }
  return { view: 'cluster' }
}
