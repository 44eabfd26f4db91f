/**
 * The literal forms of a value, checked against real tools (`tr`, `rev`, `xxd -p`, `od`)
 * where one prints them, and through the redactor: case, reversal, hex, and the forms
 * that worked before (JSON, URL, base64) still hidden.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import { inspect } from "node:util";
import { createRedactor, REDACTED } from "./redaction.ts";
import { base64Forms, escapeRegex, MIN_SECRET_LENGTH, secretForms } from "./secret-forms.ts";

const VALUES = [
  "ghp_0123456789abcdefABCDEF",
  "p4$$.w*rd+(x)?[a-z]{2}|^\\d/",
  "s3cret wörd & more=€/ok",
  'he said "hi"\n\tand\\left',
  "Ünïcödé-kéy-\u{1F511}-ok",
  "abcd",
];

function run(cmd: string, args: string[], input: string | Buffer, env?: NodeJS.ProcessEnv): string {
  return execFileSync(cmd, args, { input, env: { ...process.env, ...env } }).toString("utf8");
}

const redactorFor = (values: string[]) => createRedactor({ secrets: () => values });

describe("secretForms", () => {
  it(`gives no form for values shorter than ${MIN_SECRET_LENGTH} characters`, () => {
    assert.deepEqual(secretForms("abc"), []);
    assert.deepEqual(secretForms(""), []);
  });

  it("lists case-insensitive literal forms and exact base64 forms, none too short", () => {
    const value = "s3cret wörd/€";
    const forms = secretForms(value);
    const folded = forms.filter((f) => f.caseInsensitive).map((f) => f.text);
    for (const want of [
      value,
      [...value].reverse().join(""),
      Buffer.from(value).toString("hex"),
      encodeURIComponent(value),
      JSON.stringify(value).slice(1, -1),
    ]) {
      assert.ok(folded.includes(want), `missing ${want}`);
    }
    const exact = forms.filter((f) => !f.caseInsensitive).map((f) => f.text);
    assert.deepEqual(exact.sort(), base64Forms(Buffer.from(value)).sort());
    assert.ok(forms.every((f) => f.text.length >= MIN_SECRET_LENGTH));
  });

  it("escapes forms into regex sources that match them literally (specials included)", () => {
    for (const value of VALUES) {
      for (const form of secretForms(value)) {
        const re = new RegExp(`^(?:${escapeRegex(form.text)})$`, form.caseInsensitive ? "i" : "");
        assert.ok(re.test(form.text), `${JSON.stringify(form.text)} does not match itself`);
        if (form.caseInsensitive) assert.ok(re.test(form.text.toUpperCase()));
      }
    }
  });

  it("leaves out the byte-reversed form when it would be mostly U+FFFD", () => {
    const forms = secretForms("ключ-пароль").map((f) => f.text);
    assert.ok(!forms.some((f) => f.replaceAll("\uFFFD", "").length < MIN_SECRET_LENGTH));
  });
});

describe("createRedactor: case, reversal and hex, from real tools", () => {
  it("hides the value upper-cased, lower-cased and mixed (tr, JS case mapping)", () => {
    for (const value of VALUES) {
      const r = redactorFor([value]);
      const mixed = [...value].map((c, i) => (i % 2 ? c.toUpperCase() : c.toLowerCase())).join("");
      for (const form of [
        run("tr", ["a-z", "A-Z"], value),
        run("tr", ["A-Z", "a-z"], value),
        value.toUpperCase(),
        value.toLowerCase(),
        mixed,
      ]) {
        const out = r.text(`before ${form} after`);
        assert.equal(out, `before ${REDACTED} after`, `${value} as ${form}`);
      }
    }
  });

  it("hides the value reversed by rev (util-linux and busybox) and by bytes", () => {
    for (const value of VALUES.filter((v) => !v.includes("\n"))) {
      const r = redactorFor([value]);
      const forms = [
        run("/usr/bin/rev", [], `${value}\n`, { LC_ALL: "C.UTF-8" }).trimEnd(),
        run("/usr/bin/busybox", ["rev"], `${value}\n`, { LC_ALL: "C.UTF-8" }).trimEnd(),
        run("/usr/bin/rev", [], `${value.toUpperCase()}\n`, { LC_ALL: "C.UTF-8" }).trimEnd(),
      ];
      // busybox in the C locale (the test image) reverses bytes; decoded as the sandbox does.
      const bytes = Buffer.from(value).reverse().toString("utf8");
      if (bytes.replaceAll("\uFFFD", "").length >= MIN_SECRET_LENGTH) forms.push(bytes);
      for (const form of forms) {
        assert.equal(r.text(`x ${form} y`), `x ${REDACTED} y`, `${value} as ${form}`);
      }
    }
  });

  it("hides contiguous hex in either case (xxd -p, od | tr -d, upper-cased)", () => {
    for (const value of VALUES) {
      const r = redactorFor([value]);
      const hex = Buffer.from(value).toString("hex");
      const forms = [
        run("sh", ["-c", "od -An -tx1 -v | tr -d ' \\n'"], value),
        run("sh", ["-c", "busybox od -An -tx1 -v | tr -d ' \\n'"], value),
        hex.toUpperCase(),
        `${hex.slice(0, 6).toUpperCase()}${hex.slice(6)}`,
      ];
      if (hex.length <= 60) forms.push(run("xxd", ["-p"], value).trimEnd());
      for (const form of forms) {
        const out = r.text(`sha=${form};`);
        assert.equal(out, `sha=${REDACTED};`, `${value} as ${form}`);
      }
    }
  });

  it("keeps hiding JSON-escaped, URL-encoded and base64 forms in any case where defined", () => {
    for (const value of VALUES) {
      const r = redactorFor([value]);
      const forms = [
        JSON.stringify(value).slice(1, -1),
        JSON.stringify(value).slice(1, -1).toUpperCase(),
        encodeURIComponent(value),
        encodeURIComponent(value).toLowerCase(),
        new URLSearchParams({ q: value }).toString().slice(2),
        Buffer.from(value).toString("base64"),
        Buffer.from(value).toString("base64url"),
      ];
      for (const form of forms) {
        const out = r.text(`<${form}>`);
        assert.equal(out, `<${REDACTED}>`, `${value} as ${form}`);
      }
    }
  });

  it("hides the value as Python, PHP and Go JSON encoders escape it", () => {
    const value = "s3cret wörd & <more>=€/ok";
    const r = redactorFor([value]);
    for (const form of [
      "s3cret w\\u00f6rd & <more>=\\u20ac/ok", // python: json.dumps(value)
      "s3cret w\\u00f6rd & <more>=\\u20ac\\/ok", // php: json_encode($value)
      "s3cret wörd \\u0026 \\u003cmore\\u003e=€/ok", // go: json.Marshal(value)
    ]) {
      assert.equal(r.text(`{"v":"${form}"}`), `{"v":"${REDACTED}"}`, form);
    }
  });

  it("does not redact a base64 form in another case (base64 is case-sensitive)", () => {
    const value = "ghp_0123456789abcdefABCDEF";
    const r = redactorFor([value]);
    const upper = Buffer.from(value).toString("base64").toUpperCase();
    assert.equal(r.text(upper), upper);
  });

  it("hides the value percent-encoded by Python (quote, quote_plus) and strict RFC 3986", () => {
    const py = [
      "import sys, urllib.parse as u",
      "v = sys.stdin.read()",
      "print(u.quote(v)); print(u.quote_plus(v)); print(u.quote(v, safe=''))",
    ].join("\n");
    for (const value of VALUES) {
      const r = redactorFor([value]);
      const lines = run("python3", ["-c", py], value).split("\n").slice(0, 3);
      lines.push(encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${hex(c)}`));
      for (const form of lines) {
        assert.equal(r.text(`x ${form} y`), `x ${REDACTED} y`, `${value} as ${form}`);
      }
    }
  });

  it("hides the value's bytes in hex with a separator (Node's Buffer, bytes.hex(':'), od, \\x)", () => {
    const py = "import sys; b = sys.stdin.buffer.read(); print(b.hex(':')); print(b.hex('-'))";
    for (const value of VALUES) {
      const r = redactorFor([value]);
      const bytes = Buffer.from(value);
      const forms = run("python3", ["-c", py], value).split("\n").slice(0, 2);
      forms.push(inspect(bytes), run("od", ["-An", "-tx1", "-w256"], value).trim());
      forms.push([...bytes].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join(""));
      for (const form of forms) {
        const out = r.text(`x ${form} y`);
        assert.ok(!out.includes(form.replace(/^<Buffer |>$/g, "")), `${value} as ${form}: ${out}`);
        assert.match(out, /\[REDACTED\]/);
      }
    }
  });
});

function hex(c: string): string {
  return c.charCodeAt(0).toString(16).toUpperCase();
}
