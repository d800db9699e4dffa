/** Children h() accepts: nodes, text, and nothing (null/undefined/false are skipped). */
export type Child = Node | string | number | null | undefined | false

type Attrs = Record<string, string | number | boolean | ((event: Event) => void) | undefined>

/**
 * Creates an HTML element with attributes (`on…` functions become listeners, `true` an empty
 * attribute, false/undefined nothing) and children. Text is inserted as text, never as HTML.
 */
export function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  return fill(document.createElement(tag), attrs, children)
}

/** As h(), in the SVG namespace. */
export function s(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  return fill(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children)
}

function fill<E extends Element>(el: E, attrs: Attrs, children: Child[]): E {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue
    if (typeof value === 'function') el.addEventListener(key.slice(2).toLowerCase(), value)
    else el.setAttribute(key, value === true ? '' : String(value))
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    el.append(typeof c === 'number' ? String(c) : c)
  }
  return el
}
