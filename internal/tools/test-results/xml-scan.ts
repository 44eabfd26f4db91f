/**
 * A small, safe XML reader for test reports: elements, attributes and text, nothing else.
 * Why not a general XML parser: reports need none of DTDs, namespaces or entities, and a
 * parser that processes them is an attack surface (billion laughs, external entities).
 * This one never reads a DTD (a DOCTYPE, internal subset included, is skipped), decodes
 * only the five predefined entities and numeric character references (anything else stays
 * as written), and is bounded: depth, element count and text kept per element.
 *
 * Several documents one after another (reports read back with one `cat`) read as one
 * forest. Malformed input never throws: what was read so far is returned.
 */

export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  /** The element's own text (CDATA included), at most MAX_TEXT characters. */
  text: string;
}

export const MAX_DEPTH = 64;
export const MAX_ELEMENTS = 100_000;
export const MAX_TEXT = 16 * 1024;

const NAME = /[A-Za-z_:][\w:.-]*/y;
// A name with its value, a name alone, or one other character: every match consumes what it
// read, so a long run without "=" is read once (a pattern that could only match a name with
// its value was retried from each character of the run: quadratic).
const ATTR = /([A-Za-z_:][\w:.-]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'))?|[\s\S]/g;

/** The top-level elements of `xml`. */
export function scanXml(xml: string): XmlElement[] {
  const roots: XmlElement[] = [];
  const stack: XmlElement[] = [];
  let count = 0;
  let i = 0;
  const addText = (t: string) => {
    const top = stack[stack.length - 1];
    if (top !== undefined && top.text.length < MAX_TEXT)
      top.text = (top.text + t).slice(0, MAX_TEXT);
  };
  while (i < xml.length) {
    const lt = xml.indexOf("<", i);
    if (lt < 0) break;
    if (lt > i) addText(decode(xml.slice(i, lt)));
    if (xml.startsWith("<!--", lt)) {
      i = after(xml, "-->", lt + 4);
    } else if (xml.startsWith("<![CDATA[", lt)) {
      const end = xml.indexOf("]]>", lt + 9);
      addText(xml.slice(lt + 9, end < 0 ? xml.length : end));
      i = end < 0 ? xml.length : end + 3;
    } else if (xml.startsWith("<!", lt)) {
      i = skipDeclaration(xml, lt);
    } else if (xml.startsWith("<?", lt)) {
      i = after(xml, "?>", lt + 2);
    } else if (xml.startsWith("</", lt)) {
      const gt = xml.indexOf(">", lt);
      const name = xml.slice(lt + 2, gt < 0 ? xml.length : gt).trim();
      // Close up to the matching element; a stray end tag is ignored.
      const at = stack.map((e) => e.name).lastIndexOf(name);
      if (at >= 0) stack.length = at;
      i = gt < 0 ? xml.length : gt + 1;
    } else {
      // The name first: a "<" that starts no tag costs nothing (no scan for its ">").
      NAME.lastIndex = lt + 1;
      const name = NAME.exec(xml)?.[0];
      if (name === undefined) {
        addText("<");
        i = lt + 1;
        continue;
      }
      const gt = tagEnd(xml, lt + 1);
      const body = xml.slice(lt + 1, gt < 0 ? xml.length : gt);
      i = gt < 0 ? xml.length : gt + 1;
      if (++count > MAX_ELEMENTS) break;
      const selfClosing = body.endsWith("/");
      const el: XmlElement = {
        name,
        attrs: attrs(body.slice(name.length)),
        children: [],
        text: "",
      };
      if (stack.length >= MAX_DEPTH) continue; // too deep: dropped, its text with it
      const parent = stack[stack.length - 1];
      if (parent === undefined) roots.push(el);
      else parent.children.push(el);
      if (!selfClosing) stack.push(el);
    }
  }
  return roots;
}

function after(xml: string, end: string, from: number): number {
  const at = xml.indexOf(end, from);
  return at < 0 ? xml.length : at + end.length;
}

/** The `>` closing a start tag, quotes respected. */
function tagEnd(xml: string, from: number): number {
  let quote = "";
  for (let j = from; j < xml.length; j++) {
    const c = xml[j];
    if (quote !== "") {
      if (c === quote) quote = "";
    } else if (c === '"' || c === "'") quote = c;
    else if (c === ">") return j;
  }
  return -1;
}

/** Past a `<!…>` declaration (DOCTYPE with its internal subset, ENTITY…): never read. */
function skipDeclaration(xml: string, lt: number): number {
  let depth = 0;
  for (let j = lt + 2; j < xml.length; j++) {
    const c = xml[j];
    if (c === "[") depth++;
    else if (c === "]") depth = Math.max(0, depth - 1);
    else if (c === ">" && depth === 0) return j + 1;
  }
  return xml.length;
}

function attrs(s: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const m of s.matchAll(ATTR)) {
    const k = m[1];
    const v = m[2] ?? m[3];
    if (k !== undefined && v !== undefined && !(k in out)) out[k] = decode(v);
  }
  return out;
}

const PREDEFINED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

/** Predefined entities and character references; anything else stays as written. */
export function decode(s: string): string {
  return s.replace(
    /&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|lt|gt|amp|quot|apos);/g,
    (whole, ref: string) => {
      if (ref[0] !== "#") return PREDEFINED[ref] ?? whole;
      const code =
        ref[1] === "x" ? Number.parseInt(ref.slice(2), 16) : Number.parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff)
        ? String.fromCodePoint(code)
        : whole;
    },
  );
}
