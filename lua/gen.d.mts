// Types of what the tests import from gen.mjs.
/**
 * A script's text with every `-- @include lib/<file>.lua` line replaced by that library and,
 * before it, the libraries it includes, each once (paths relative to `root`, default lua/).
 * Throws on an include cycle or a missing library.
 */
export function expand(source: string, root?: string): string;
/** The script without the library functions it never calls. */
export function pruneUnused(source: string): string;
/** The script without comment lines, indentation, blank lines or the spaces Lua does not need. */
export function compact(source: string): string;
/**
 * One short name per name the scripts declare (locals, local functions, parameters, loop
 * variables), the most used first and the same in every script; never a keyword, a global or
 * a field a script uses.
 */
export function localNames(sources: readonly string[]): Map<string, string>;
/** The script with each name it declares replaced by its short name in `names`. */
export function renameLocals(source: string, names: ReadonlyMap<string, string>): string;
