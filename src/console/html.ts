/**
 * HTML built from templates whose every interpolated value is escaped unless it is HTML made
 * here ({@link Html}): names, owners and error messages come from Redis and from requests.
 * @module
 */

/** A piece of HTML made by {@link h}: inserted into another template as it is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text safe in an element's content and in a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join("");
  if (value === null || value === undefined || value === false) return "";
  return escapeHtml(String(value));
}

/**
 * A template of HTML: each value is escaped, but an {@link Html} (or an array of them) is
 * inserted as it is; `null`, `undefined` and `false` insert nothing.
 */
export function h(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let text = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) text += render(values[i]) + (strings[i + 1] ?? "");
  return new Html(text);
}
