/**
 * Whether a command's argument could name a path a policy protects (workspace.denyPatterns,
 * risk.secretPaths, …). A literal word is normalised and every tail of it is tried
 * (`../x/.git/config`, `/workspace/.env`, `/proc/self/cwd/.env` all end in a protected
 * path, and `cd` may have moved the shell anywhere). A shell glob (`.gi?/config`, `.[g]it`,
 * `*​/.env`, `.*`) is compared with each protected glob as languages: it counts when some
 * path matches both, with the shell's rules (`*` and `?` never match `/`, nor a leading `.`
 * unless the pattern starts with one). Pure; compiled once per policy.
 */
import picomatch from "picomatch";

/** Tests words and shell globs against one list of protected globs. */
export interface PathGuard {
  /** The protected glob a literal path (as written in a command) falls under, if any. */
  literal(path: string): string | undefined;
  /**
   * The protected glob some expansion of a shell glob could fall under, if any. With
   * `dots`, wildcards also match a leading "." (find -name, which does not hide dotfiles).
   */
  glob(pattern: string, dots?: boolean): string | undefined;
}

type CharSet = { any: true } | { any: false; chars: Set<string>; negated: boolean };
type Token = { star: true } | { star: false; set: CharSet };
type Segment = Token[] | "globstar";

const ANY: CharSet = { any: true };
const MAX_SUFFIXES = 32;
const MAX_BRACE = 64;

export function createPathGuard(globs: readonly string[]): PathGuard {
  const matchers = globs.map((g) => ({ g, m: picomatch(g, { dot: true }) }));
  // One alternation of every glob answers the common case (no match) with one test a tail.
  const any =
    globs.length === 0
      ? undefined
      : new RegExp(globs.map((g) => `(?:${picomatch.makeRe(g, { dot: true }).source})`).join("|"));
  const parsed = globs.flatMap((g) =>
    (expandBraces(g, MAX_BRACE) ?? [g]).map((e) => ({ g, segs: protectedSegments(e) })),
  );
  return {
    literal(path) {
      for (const tail of tails(path)) {
        if (any === undefined || !any.test(tail)) continue;
        for (const { g, m } of matchers) if (m(tail)) return g;
      }
      return undefined;
    },
    glob(pattern, dots = false) {
      const all = normalise(splitUnescaped(pattern)).map((seg) => compileSegment(seg, dots));
      for (const i of tailStarts(all.length)) {
        const shell = all.slice(i);
        for (const { g, segs: prot } of parsed) if (segmentsMeet(shell, prot)) return g;
      }
      return undefined;
    },
  };
}

/**
 * Where the tails tried start: the whole path, then the MAX_SUFFIXES - 1 shortest (a
 * root-relative glob like `package.json` names a short tail; `**` globs match the whole).
 * However deep the path, its last segments are always tried.
 */
function tailStarts(n: number): number[] {
  const out = n > 0 ? [0] : [];
  for (let i = Math.max(1, n - (MAX_SUFFIXES - 1)); i < n; i++) out.push(i);
  return out;
}

/** Every tail of the normalised path at a segment boundary ("a/.git/x" → itself, ".git/x", "x"). */
export function tails(path: string): string[] {
  const segs = normalise(path.split("/"));
  return tailStarts(segs.length).map((i) => segs.slice(i).join("/"));
}

/**
 * Drops empty and `.` segments and resolves `..` where it can ("/workspace/" prefix
 * included). A `..` with nothing before it is dropped: above the start (the shell's cwd,
 * or `/`, whose `..` is itself) it names no file, and what follows is the path's tail.
 */
function normalise(segs: string[]): string[] {
  const out: string[] = [];
  for (const s of segs) {
    if (s === "" || s === ".") continue;
    if (s === "..") out.pop();
    else out.push(s);
  }
  return out;
}

function splitUnescaped(pattern: string): string[] {
  const segs: string[] = [];
  let cur = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === "\\") {
      cur += c + (pattern[i + 1] ?? "");
      i++;
    } else if (c === "/") {
      segs.push(cur);
      cur = "";
    } else cur += c;
  }
  segs.push(cur);
  return segs;
}

/** One segment of a shell glob (`*`, `?`, `[…]`, escapes), or `**` (globstar). */
type ShellSegment = { tokens: Token[]; dot: boolean } | "globstar";

/** `dot`: the segment may start with "." (it starts with a literal dot, or `dots` is set). */
function compileSegment(seg: string, dots: boolean): ShellSegment {
  if (seg === "**") return "globstar";
  const t = tokens(seg);
  const first = t[0];
  const dot = dots || (first !== undefined && !first.star && !first.set.any && hasDot(first.set));
  return { tokens: t, dot };
}

/** One segment of a policy glob; extglobs and regex groups count as "any name". */
function protectedSegments(glob: string): Segment[] {
  return glob.split("/").map((seg): Segment => {
    if (seg === "**") return "globstar";
    if (/[()|+@!]\(|\(/.test(seg)) return [{ star: true }];
    return tokens(seg);
  });
}

function tokens(seg: string): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i] as string;
    if (c === "\\") {
      out.push(lit(seg[i + 1] ?? "\\"));
      i++;
    } else if (c === "*") {
      if (out.at(-1)?.star !== true) out.push({ star: true });
    } else if (c === "?") {
      out.push({ star: false, set: ANY });
    } else if (c === "[") {
      const cls = bracket(seg, i);
      if (cls === undefined) out.push(lit("["));
      else {
        out.push({ star: false, set: cls.set });
        i = cls.end;
      }
    } else out.push(lit(c));
  }
  return out;
}

function lit(c: string): Token {
  return { star: false, set: { any: false, chars: new Set([c]), negated: false } };
}

/** A bracket expression starting at seg[i] === "[": its set and the index of its "]". */
function bracket(seg: string, i: number): { set: CharSet; end: number } | undefined {
  let j = i + 1;
  const negated = seg[j] === "!" || seg[j] === "^";
  if (negated) j++;
  const chars = new Set<string>();
  let first = true;
  for (; j < seg.length; j++) {
    const c = seg[j] as string;
    if (c === "]" && !first) return { set: { any: false, chars, negated }, end: j };
    first = false;
    const to = seg[j + 2];
    if (c === "[" && seg[j + 1] === ":") {
      // A character class ([:alpha:]) or a wide range: as good as "any character" here.
      const close = seg.indexOf(":]", j + 2);
      return close < 0 ? undefined : { set: ANY, end: skipTo(seg, close + 2) };
    }
    if (seg[j + 1] === "-" && to !== undefined && to !== "]") {
      const a = c.codePointAt(0) as number;
      const b = to.codePointAt(0) as number;
      if (b - a > 512) return { set: ANY, end: skipTo(seg, j + 2) };
      for (let k = a; k <= b; k++) chars.add(String.fromCodePoint(k));
      j += 2;
    } else chars.add(c === "\\" ? (seg[++j] ?? "\\") : c);
  }
  return undefined;
}

/** Index of the "]" closing a bracket expression, from position j on. */
function skipTo(seg: string, j: number): number {
  const close = seg.indexOf("]", j);
  return close < 0 ? seg.length - 1 : close;
}

/**
 * True when some path matches the shell segments and the protected segments. A shell `**`
 * (bash's globstar) is taken as any number of segments: more than sh matches, never less.
 */
function segmentsMeet(shell: ShellSegment[], prot: Segment[]): boolean {
  const memo = new Map<number, boolean>();
  const go = (i: number, j: number): boolean => {
    const key = i * (prot.length + 1) + j;
    const hit = memo.get(key);
    if (hit !== undefined) return hit;
    memo.set(key, false); // globstar against globstar: no cycle
    const a = shell[i];
    const b = prot[j];
    let r = false;
    if (a === undefined && b === undefined) r = true;
    else if (a === "globstar") r = go(i + 1, j) || (b !== undefined && go(i, j + 1));
    if (!r && b === "globstar") r = go(i, j + 1) || (a !== undefined && go(i + 1, j));
    if (!r && a !== undefined && a !== "globstar" && b !== undefined && b !== "globstar")
      r = namesMeet(a, b) && go(i + 1, j + 1);
    memo.set(key, r);
    return r;
  };
  return go(0, 0);
}

/** Answers per shell segment and policy segment (a policy is compiled once; calls repeat). */
const meetCache = new WeakMap<Token[], WeakMap<Token[], boolean>>();

/**
 * True when some file name matches both the shell segment `a` and the policy segment `b`
 * (the two languages intersect, with the shell's rule that wildcards never give a leading
 * "."), and in that name at least one character the policy spells out is also spelled out
 * by the shell (a "." only at the start), unless the shell segment spells out nothing
 * (`*`, `??`). So `cr?dentials.json`,
 * `.en?.local`, `packag?.json`, `ci.y?l` and a bare `*` count as naming `credentials*`,
 * `.env.*`, `package.json`, `*.yml`; `*.ts` does not count as naming `credentials*` (it could
 * only through a file such as credentials.ts, where the shell's wildcard supplies every
 * character the policy names).
 */
function namesMeet(a: { tokens: Token[]; dot: boolean }, b: Token[]): boolean {
  let byPolicy = meetCache.get(a.tokens);
  if (byPolicy === undefined) {
    byPolicy = new WeakMap();
    meetCache.set(a.tokens, byPolicy);
  }
  const cached = byPolicy.get(b);
  if (cached !== undefined) return cached;
  const r = intersects(a.tokens, b, a.dot);
  byPolicy.set(b, r);
  return r;
}

/** Exact intersection of two segment languages (product automaton, memoised states). */
function intersects(a: Token[], b: Token[], dot: boolean): boolean {
  const wildOnly = a.every((t) => !spelled(t));
  const seen = new Set<number>();
  // State: positions in a and b, whether a character was consumed, whether a spelled-out
  // policy character met a spelled-out shell one.
  const stack: [number, number, boolean, boolean][] = [[0, 0, false, wildOnly]];
  const key = (i: number, j: number, started: boolean, hit: boolean): number =>
    ((i * (b.length + 1) + j) * 2 + (started ? 1 : 0)) * 2 + (hit ? 1 : 0);
  while (stack.length > 0) {
    const [i, j, started, hit] = stack.pop() as [number, number, boolean, boolean];
    const k = key(i, j, started, hit);
    if (seen.has(k)) continue;
    seen.add(k);
    if (i === a.length && j === b.length && started && hit) return true;
    const ta = a[i];
    const tb = b[j];
    if (ta?.star) stack.push([i + 1, j, started, hit]);
    if (tb?.star) stack.push([i, j + 1, started, hit]);
    if (ta === undefined || tb === undefined) continue;
    const sa = ta.star ? ANY : ta.set;
    const sb = tb.star ? ANY : tb.set;
    if (!setsMeet(sa, sb, !started && !dot)) continue;
    // A "." met inside a name (`*.ts` against `.env.*` with find -name) says little; a
    // leading one is the shell opting into hidden files (`.*` against `.git`).
    const named = spelled(ta) && spelled(tb) && (!started || setsMeet(sa, sb, true));
    stack.push([ta.star ? i : i + 1, tb.star ? j : j + 1, true, hit || named]);
  }
  return false;
}

/** A token that names its character(s): not a wildcard, not a negated bracket. */
function spelled(t: Token): boolean {
  return !t.star && !t.set.any && !t.set.negated;
}

/** True when some character other than "/" (and ".", when `noDot`) is in both sets. */
function setsMeet(x: CharSet, y: CharSet, noDot: boolean): boolean {
  const ok = (c: string): boolean => c !== "/" && !(noDot && c === ".");
  if (!x.any && !x.negated) return [...x.chars].some((c) => ok(c) && inSet(y, c));
  if (!y.any && !y.negated) return [...y.chars].some((c) => ok(c) && inSet(x, c));
  return true; // two open sets (any, or negated finite sets) always share a character
}

function inSet(s: CharSet, c: string): boolean {
  if (s.any) return true;
  return s.negated ? !s.chars.has(c) : s.chars.has(c);
}

function hasDot(s: CharSet): boolean {
  return !s.any && !s.negated && s.chars.has(".");
}

/**
 * Bash brace expansion of a glob-form word ({a,b}, {1..3}, {a..c}, nested), backslash
 * escapes kept. Undefined when it would make more than `limit` words.
 */
export function expandBraces(word: string, limit: number): string[] | undefined {
  const group = findBraceGroup(word);
  if (group === undefined) return [word];
  const { open, close, parts } = group;
  const out: string[] = [];
  for (const part of parts) {
    const rest = expandBraces(word.slice(0, open) + part + word.slice(close + 1), limit);
    if (rest === undefined) return undefined;
    out.push(...rest);
    if (out.length > limit) return undefined;
  }
  return out;
}

function findBraceGroup(
  word: string,
): { open: number; close: number; parts: string[] } | undefined {
  for (let open = 0; open < word.length; open++) {
    if (word[open] === "\\") {
      open++;
      continue;
    }
    if (word[open] !== "{") continue;
    let depth = 0;
    const cuts: number[] = [];
    for (let k = open; k < word.length; k++) {
      const c = word[k];
      if (c === "\\") k++;
      else if (c === "{") depth++;
      else if (c === "," && depth === 1) cuts.push(k);
      else if (c === "}" && --depth === 0) {
        const inner = word.slice(open + 1, k);
        if (cuts.length > 0) {
          const bounds = [open, ...cuts, k];
          const parts = bounds.slice(1).map((b, n) => word.slice((bounds[n] as number) + 1, b));
          return { open, close: k, parts };
        }
        const seq = sequence(inner);
        if (seq !== undefined) return { open, close: k, parts: seq };
        break;
      }
    }
  }
  return undefined;
}

/** {1..5}, {a..e}, {10..1..3}; undefined when not a sequence or too long. */
function sequence(inner: string): string[] | undefined {
  const m = /^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$/.exec(inner);
  if (m === null) return undefined;
  const num = /\d/.test(m[1] as string);
  const a = num ? Number(m[1]) : (m[1] as string).charCodeAt(0);
  const b = num ? Number(m[2]) : (m[2] as string).charCodeAt(0);
  const step = Math.abs(Number(m[3] ?? 1)) || 1;
  if (Math.abs(b - a) / step > MAX_BRACE) return Array.from({ length: MAX_BRACE + 1 }, () => "");
  const out: string[] = [];
  for (let v = a; a <= b ? v <= b : v >= b; v += a <= b ? step : -step)
    out.push(num ? String(v) : String.fromCharCode(v));
  return out;
}
