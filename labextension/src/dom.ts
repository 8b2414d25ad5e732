/**
 * The one DOM builder of the project's pages: the JupyterLab sidebar (this folder) and the GPU
 * console (culler/gpuaas_service/console/src), which compiles this same file into its own build.
 * No imports, so that both builds can take it as it is.
 */

/** What a child may be: `null`, `undefined` and `false` are left out (conditional children). */
export type Child = Node | string | null | undefined | false;

/**
 * An element `tag` with attributes (`undefined` ones left out; `class` included) and children.
 *
 * ```ts
 * h('p', { class: 'hint', title: why }, 'Idle for ', h('strong', {}, '3 h'));
 * ```
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Readonly<Record<string, string | undefined>> = {},
  ...children: readonly Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined) {
      element.setAttribute(name, value);
    }
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) {
      element.append(child);
    }
  }
  return element;
}
