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
      for (let i = 0; i < all.length && i < MAX_SUFFIXES; i++) {
        const shell = all.slice(i);
        for (const { g, segs: prot } of parsed) if (segmentsMeet(shell, prot)) return g;
      }
      return undefined;
    },
  };
}

/** Every tail of the normalised path at a segment boundary ("a/.git/x" → itself, ".git/x", "x"). */
export function tails(path: string): string[] {
  const segs = normalise(path.split("/"));
  const out: string[] = [];
  for (let i = 0; i < segs.length && i < MAX_SUFFIXES; i++) out.push(segs.slice(i).join("/"));
  return out;
}

/** Drops empty and `.` segments and resolves `..` where it can ("/workspace/" prefix included). */
function normalise(segs: string[]): string[] {
  const out: string[] = [];
  for (const s of segs) {
    if (s === "" || s === ".") continue;
    if (s === ".." && out.length > 0 && out[out.length - 1] !== "..") out.pop();
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

/** One segment of a shell glob (`*`, `?`, `[…]`, escapes): its regex and literal prefix. */
interface ShellSegment {
  re: RegExp;
  prefix: string;
}

function compileSegment(seg: string, dots: boolean): ShellSegment {
  const t = tokens(seg);
  return { re: shellRegex(t, dots), prefix: literalPrefix(t) };
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

/** True when some path matches the shell segments and the protected segments. */
function segmentsMeet(shell: ShellSegment[], prot: Segment[]): boolean {
  const memo = new Map<number, boolean>();
  const go = (i: number, j: number): boolean => {
    const key = i * (prot.length + 1) + j;
    const hit = memo.get(key);
    if (hit !== undefined) return hit;
    let r: boolean;
    if (j === prot.length) r = i === shell.length;
    else if (prot[j] === "globstar") r = go(i, j + 1) || (i < shell.length && go(i + 1, j));
    else
      r =
        i < shell.length &&
        namesMeet(shell[i] as ShellSegment, prot[j] as Token[]) &&
        go(i + 1, j + 1);
    memo.set(key, r);
    return r;
  };
  return go(0, 0);
}

/**
 * True when a file name matching the policy segment `b` matches the shell segment `a`. The
 * policy side is sampled, not taken as a whole language: its `*` stands for "" or "x" (a
 * leading one for "x" or the shell segment's literal prefix + "x"), `?` for "x", a bracket
 * for its first character. So `*.ts` does not count as naming `credentials*` (it could only
 * through a file such as credentials.ts), while `.e*`, `cred*`, `k*.pem`, `id_*` and a bare
 * `*` do.
 */
function namesMeet(a: ShellSegment, b: Token[]): boolean {
  return policySamples(b, a.prefix).some((name) => a.re.test(name));
}

const MAX_SAMPLES = 64;

/** Samples per policy segment and prefix (the policy is compiled once; calls repeat). */
const sampleCache = new WeakMap<Token[], Map<string, string[]>>();

function policySamples(b: Token[], prefix: string): string[] {
  let byPrefix = sampleCache.get(b);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    sampleCache.set(b, byPrefix);
  }
  const hit = byPrefix.get(prefix);
  if (hit !== undefined) return hit;
  const made = makeSamples(b, prefix);
  // Prefixes come from commands: keep the cache small.
  if (byPrefix.size < 256) byPrefix.set(prefix, made);
  return made;
}

function makeSamples(b: Token[], prefix: string): string[] {
  let out = [""];
  b.forEach((t, k) => {
    let options: string[];
    if (t.star) options = k === 0 ? [...new Set(["x", `${prefix}x`])] : ["", "x"];
    else if (t.set.any) options = ["x"];
    else if (!t.set.negated) options = [[...t.set.chars][0] ?? "x"];
    else {
      const not = t.set.chars;
      options = ["x", "y", "_"].filter((c) => !not.has(c));
    }
    out = out.flatMap((s) => options.map((o) => s + o)).slice(0, MAX_SAMPLES);
  });
  return out;
}

function literalPrefix(a: Token[]): string {
  let s = "";
  for (const t of a) {
    if (t.star || t.set.any || !isLiteral(t.set)) break;
    s += [...t.set.chars][0];
  }
  return s;
}

/** The shell's reading of one segment: wildcards never match "/", nor a leading ".". */
function shellRegex(a: Token[], dots: boolean): RegExp {
  let src = "";
  for (const t of a) {
    if (t.star) src += "[^/]*";
    else if (t.set.any) src += "[^/]";
    else {
      const chars = [...t.set.chars].map((c) => c.replace(/[\\\][^-]/g, "\\$&")).join("");
      if (t.set.negated) src += `[^/${chars}]`;
      else src += t.set.chars.size === 1 ? escapeRe([...t.set.chars][0] as string) : `[${chars}]`;
    }
  }
  const first = a[0];
  const dot =
    dots || (first !== undefined && !first.star && isLiteral(first.set) && hasDot(first.set));
  return new RegExp(`^${dot ? "" : "(?!\\.)"}${src}$`, "u");
}

function hasDot(s: CharSet): boolean {
  return !s.any && s.chars.has(".");
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

function isLiteral(s: CharSet): s is { any: false; chars: Set<string>; negated: boolean } {
  return !s.any && !s.negated && s.chars.size === 1;
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
