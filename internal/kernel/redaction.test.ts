/**
 * Redaction, hostile: secrets with regex specials, in every encoding and base64 alignment,
 * keyed values, patterns, JSON documents, live streams split anywhere, and 4 MiB of hostile
 * shapes shown to end (under a hard cap; their timing is bench/hostile-input.ts's).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { finishesUnderCap } from "../testing/hard-cap.ts";
import {
  base64Forms,
  createRedactor,
  createStreamRedactor,
  MIN_SECRET_LENGTH,
  REDACTED,
  type Redactor,
} from "./redaction.ts";
import { HOSTILE_SHAPES, type Redacted, STREAM_SHAPES } from "./redaction-hostile-fixtures.ts";
import { createEnvSecretProvider, createSecretResolver } from "./secrets.ts";

const SPECIAL = "p4$$.w*rd+(x)?[a-z]{2}|^\\d/";
const SPACEY = "s3cret wörd & more=€/ok";
const QUOTEY = 'he said "hi"\n\tand\\left';
const TOKEN = "ghp_0123456789abcdefABCDEF";

function redactorFor(values: string[], keys: string[] = [], patterns: string[] = []): Redactor {
  return createRedactor({ secrets: () => values, keys, patterns });
}

const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");
const b64url = (s: string | Buffer) => Buffer.from(s).toString("base64url");

/** True when no piece of `out` left between redactions decodes (at any alignment) to `secret`. */
function base64Leaks(out: string, secret: string): boolean {
  for (const piece of out.split(REDACTED)) {
    const clean = piece.replace(/[^A-Za-z0-9+/_-]/g, "");
    for (let shift = 0; shift < 4; shift++) {
      const decoded = Buffer.from(clean.slice(shift), "base64").toString("latin1");
      if (decoded.includes(Buffer.from(secret).toString("latin1"))) return true;
    }
  }
  return false;
}

describe("createRedactor: secret values", () => {
  it("hides the plain value, regex specials included, everywhere it occurs", () => {
    const r = redactorFor([SPECIAL, TOKEN]);
    assert.equal(
      r.text(`a ${SPECIAL} b ${TOKEN}${TOKEN} c ${SPECIAL}`),
      `a ${REDACTED} b ${REDACTED} c ${REDACTED}`,
    );
    assert.equal(r.text("nothing here $& \\1"), "nothing here $& \\1");
    assert.equal(r.text(""), "");
  });

  it(`ignores values shorter than ${MIN_SECRET_LENGTH} characters (too many false hits)`, () => {
    const r = redactorFor(["abc", "1", "", "abcd"]);
    assert.equal(r.text("abc 1 abcd"), `abc 1 ${REDACTED}`);
  });

  it("looks values up on every call, so a newly resolved one counts at once", async () => {
    const resolver = createSecretResolver({
      allow: ["A"],
      providers: [createEnvSecretProvider({ A: "late-secret" })],
    });
    const r = createRedactor({ secrets: () => resolver.knownValues(), keys: [], patterns: [] });
    assert.equal(r.text("x late-secret"), "x late-secret");
    await resolver.resolve("$ENV.A");
    assert.equal(r.text("x late-secret"), `x ${REDACTED}`);
    const fresh: string[] = [];
    const r2 = createRedactor({ secrets: () => [...fresh] });
    assert.equal(r2.text("zzzz"), "zzzz");
    fresh.push("zzzz");
    assert.equal(r2.text("zzzz"), REDACTED);
  });

  it("hides whole base64 forms: standard and URL-safe, padded and not", () => {
    for (const secret of [SPECIAL, SPACEY, TOKEN, "abcd", "abcde", "abcdef", "\u{1F511}key"]) {
      const r = redactorFor([secret]);
      for (const form of [b64(secret), b64(secret).replace(/=+$/, ""), b64url(secret)]) {
        const out = r.text(`value: ${form} end`);
        assert.equal(out, `value: ${REDACTED} end`, `${secret} as ${form}`);
      }
      const padded = b64url(secret) + "=".repeat((4 - (b64url(secret).length % 4)) % 4);
      assert.equal(r.text(padded), REDACTED);
    }
  });

  it("hides the value inside a longer base64 blob at every alignment (prefix 0..5, suffix 0..5)", () => {
    for (const secret of [TOKEN, SPECIAL, "abcd", "wxyz1", SPACEY]) {
      const r = redactorFor([secret]);
      for (let p = 0; p <= 5; p++) {
        for (let s = 0; s <= 5; s++) {
          const plain = `${"P".repeat(p)}${secret}${"\n".repeat(s)}`;
          for (const blob of [b64(plain), b64url(plain), b64(`user:${secret}`)]) {
            const out = r.text(`Authorization: Basic ${blob}\n`);
            assert.ok(out.includes(REDACTED), `prefix ${p} suffix ${s}: ${blob} -> ${out}`);
            assert.ok(!base64Leaks(out, secret), `prefix ${p} suffix ${s} leaks: ${out}`);
          }
        }
      }
    }
  });

  it("computes the stable inner substring for each alignment", () => {
    const secret = Buffer.from("SECRETVALUE");
    const forms = base64Forms(secret);
    for (let p = 0; p < 3; p++) {
      for (let s = 0; s < 3; s++) {
        const blob = b64(
          Buffer.concat([Buffer.from("x".repeat(p)), secret, Buffer.from("y".repeat(s))]),
        );
        assert.ok(
          forms.some((f) => blob.includes(f) && f.length >= 12),
          `no stable form of offset ${p} in ${blob}`,
        );
      }
    }
  });

  it("hides URL-encoded forms: encodeURIComponent, form encoding with +, either hex case", () => {
    const r = redactorFor([SPACEY, SPECIAL]);
    const forms = [
      encodeURIComponent(SPACEY),
      encodeURIComponent(SPACEY).replaceAll("%20", "+"),
      new URLSearchParams({ q: SPACEY }).toString().slice(2),
      encodeURIComponent(SPACEY).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
      encodeURIComponent(SPECIAL),
      new URLSearchParams({ q: SPECIAL }).toString().slice(2),
    ];
    for (const form of forms) {
      assert.equal(r.text(`GET /x?q=${form}&page=2`), `GET /x?q=${REDACTED}&page=2`, form);
    }
  });

  it("hides JSON-escaped forms (and \\u-escaped non-ASCII)", () => {
    const r = redactorFor([QUOTEY, SPACEY]);
    const doc = JSON.stringify({ out: `before ${QUOTEY} after`, other: SPACEY });
    const out = r.text(doc);
    assert.equal(out, JSON.stringify({ out: `before ${REDACTED} after`, other: REDACTED }));
    const ascii = JSON.stringify(SPACEY).replace(
      /[\u007f-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`,
    );
    assert.equal(r.text(ascii), `"${REDACTED}"`);
  });

  it("finds overlapping values of different secrets", () => {
    const r = redactorFor(["abcd1234", "1234wxyz"]);
    assert.equal(r.text("--abcd1234wxyz--"), `--${REDACTED}--`);
  });
});

describe("createRedactor: keys and patterns", () => {
  const r = createRedactor({
    secrets: () => [],
    keys: ["TOKEN", "password", "api_key", "authorization"],
    patterns: ["sk-[A-Za-z0-9]{20,}", "(?:QQ)*"],
  });

  it("hides values of keys that contain a configured name, case-insensitively", () => {
    const cases: [string, string][] = [
      ["export GITHUB_TOKEN=abc123", `export GITHUB_TOKEN=${REDACTED}`],
      ["GITHUB_TOKEN = abc123 next", `GITHUB_TOKEN = ${REDACTED} next`],
      ["db_password: hunter22", `db_password: ${REDACTED}`],
      ['{"apiToken": "zz\\"zz", "user": "bob"}', `{"apiToken": "${REDACTED}", "user": "bob"}`],
      ["{'Password': 'p w'}", `{'Password': '${REDACTED}'}`],
      ["Authorization: Bearer eyJhbGciOi.x.y", `Authorization: Bearer ${REDACTED}`],
      ["--password=letmein --user=me", `--password=${REDACTED} --user=me`],
      ["url=https://h/p?access_token=abc&y=1", `url=https://h/p?access_token=${REDACTED}&y=1`],
      ["MY_API_KEY := 'q'", `MY_API_KEY := '${REDACTED}'`],
      [
        '{\\"password\\":\\"hunter2\\",\\"user\\":\\"bob\\"}',
        `{\\"password\\":\\"${REDACTED}\\",\\"user\\":\\"bob\\"}`,
      ],
      ['token: "unterminated value', `token: "${REDACTED}`],
      ["PATH=/usr/bin HOME=/root", "PATH=/usr/bin HOME=/root"],
      ["tokenizer", "tokenizer"],
      ["line1\ntoken:\nnext: 1", "line1\ntoken:\nnext: 1"],
    ];
    for (const [input, want] of cases) assert.equal(r.text(input), want, input);
  });

  it("hides every pattern match and never redacts an empty match", () => {
    const key = `sk-${"A1b2".repeat(8)}`;
    assert.equal(r.text(`key ${key} and ${key}.`), `key ${REDACTED} and ${REDACTED}.`);
    assert.equal(r.text("sk-short y"), "sk-short y");
    assert.equal(r.text("a QQQQ b"), `a ${REDACTED} b`);
  });

  it("refuses a broken pattern or an empty key with EVALIDATION naming the field", () => {
    assert.throws(
      () => createRedactor({ secrets: () => [], keys: [], patterns: ["ok", "("] }),
      (e: unknown) => isAgentdError(e, "EVALIDATION") && e.field === "redaction.patterns[1]",
    );
    assert.throws(
      () => createRedactor({ secrets: () => [], keys: [""], patterns: [] }),
      (e: unknown) => isAgentdError(e, "EVALIDATION") && e.field === "redaction.keys[0]",
    );
  });
});

describe("createRedactor: json", () => {
  it("deep-copies, redacting strings, keys, and whole values of secret keys", () => {
    const r = createRedactor({ secrets: () => [TOKEN], keys: ["secret", "TOKEN"], patterns: [] });
    const input = {
      stdout: `cloned with ${TOKEN}`,
      nested: [{ lines: ["ok", `x=${b64(TOKEN)}`] }, 3, null, true],
      env: { GITHUB_TOKEN: { anything: "even objects" }, clientSecret: 42, HOME: "/tmp" },
      [TOKEN]: "key holds the secret",
    };
    const before = structuredClone(input);
    const out = r.json(input);
    assert.deepEqual(out, {
      stdout: `cloned with ${REDACTED}`,
      nested: [{ lines: ["ok", `x=${REDACTED}`] }, 3, null, true],
      env: { GITHUB_TOKEN: REDACTED, clientSecret: REDACTED, HOME: "/tmp" },
      [REDACTED]: "key holds the secret",
    });
    assert.deepEqual(input, before, "the input is not mutated");
    assert.ok(!JSON.stringify(out).includes(TOKEN));
  });

  it("survives cycles and leaves bytes and dates alone", () => {
    const r = redactorFor([TOKEN]);
    const cyclic: Record<string, unknown> = { s: TOKEN };
    cyclic.self = cyclic;
    assert.deepEqual(r.json(cyclic), { s: REDACTED, self: "[Circular]" });
    const bytes = new Uint8Array([1, 2, 3]);
    const d = new Date(0);
    const out = r.json({ bytes, d });
    assert.deepEqual(out, { bytes, d });
    assert.notEqual(out.bytes, bytes);
  });
});

describe("createStreamRedactor", () => {
  it("catches a secret (and its encodings) split at every position across two chunks", () => {
    for (const secret of [TOKEN, SPECIAL, QUOTEY, SPACEY]) {
      const r = redactorFor([secret]);
      // Long enough that `push` (which holds back the longest form, 6 characters a byte for
      // `0x73, `) has something safe to emit before the value.
      const filler = "f".repeat(400);
      const cores = [
        secret,
        b64(`xy${secret}z`),
        b64url(`${secret}\n`),
        encodeURIComponent(secret),
        new URLSearchParams({ q: secret }).toString().slice(2),
        JSON.stringify({ v: secret }),
      ];
      for (const core of cores) {
        const text = `${filler} ${core} ${filler}`;
        const want = r.text(text);
        assert.ok(want.includes(REDACTED));
        let emittedEarly = false;
        for (let i = 0; i <= text.length; i++) {
          const s = createStreamRedactor(r, secret.length);
          const first = s.push(text.slice(0, i));
          const second = s.push(text.slice(i));
          emittedEarly ||= first.length > 0;
          const got = first + second + s.end();
          assert.equal(got, want, `split at ${i} of ${JSON.stringify(text)}`);
          assert.ok(!got.includes(core), `split at ${i} leaks`);
        }
        assert.ok(emittedEarly, "the first chunk is emitted when it is safe");
      }
    }
  });

  it("emits early what is safe, and equals text() however the input is chunked", () => {
    const r = createRedactor({
      secrets: () => [TOKEN, SPACEY],
      keys: ["TOKEN", "PASSWORD"],
      patterns: ["sk-[A-Za-z0-9]{20,40}"],
    });
    const lines: string[] = [];
    for (let i = 0; i < 400; i++) {
      const kind = i % 7;
      if (kind === 0) lines.push(`step ${i}: using ${TOKEN} now`);
      else if (kind === 1) lines.push(`export GITHUB_TOKEN=value-${i}-${"z".repeat(i % 13)}`);
      else if (kind === 2) lines.push(`{"password": "pw ${i}", "n": ${i}}`);
      else if (kind === 3) lines.push(`key sk-${"Ab1".repeat(8)}${i}`);
      else if (kind === 4) lines.push(`b64 ${b64(`${"#".repeat(i % 5)}${SPACEY}`)}`);
      else lines.push(`plain line ${i} ${"-".repeat(i % 50)}`);
    }
    const text = `${lines.join("\n")}\n`;
    const want = r.text(text);
    let seed = 42;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    for (let round = 0; round < 30; round++) {
      const chunks: string[] = [];
      for (let at = 0; at < text.length; ) {
        const n = 1 + Math.floor(rand() * (round % 2 === 0 ? 40 : 2000));
        chunks.push(text.slice(at, at + n));
        at += n;
      }
      const s = createStreamRedactor(r, 64);
      let out = "";
      let emittedBeforeEnd = 0;
      for (const c of chunks) {
        const piece = s.push(c);
        emittedBeforeEnd += piece.length;
        out += piece;
      }
      out += s.end();
      assert.equal(out, want, `round ${round}`);
      assert.ok(emittedBeforeEnd > want.length / 2, "most output is emitted before the end");
    }
  });

  it("holds a keyed value that could still grow until its end arrives", () => {
    const r = createRedactor({ secrets: () => [], keys: ["TOKEN"], patterns: [] });
    const s = createStreamRedactor(r, 8);
    let out = s.push(`${"filler line\n".repeat(20)}GITHUB_TOKEN=abc`);
    assert.ok(!out.includes("GITHUB_TOKEN"));
    out += s.push("def\nok\n");
    out += s.end();
    assert.equal(out, `${"filler line\n".repeat(20)}GITHUB_TOKEN=${REDACTED}\nok\n`);
  });

  it("refuses a redactor it did not make and a bad maxSecretLength", () => {
    assert.throws(
      () => createStreamRedactor({ text: (s) => s, json: (v) => v }, 10),
      (e: unknown) => isAgentdError(e, "EVALIDATION"),
    );
    assert.throws(
      () => createStreamRedactor(redactorFor([]), -1),
      (e: unknown) => isAgentdError(e, "EVALIDATION"),
    );
  });
});

describe("hostile input ends", () => {
  // Each case runs in a worker under a generous hard cap (60 s): linear work on 4 MiB takes
  // about a second at most, even on a loaded machine, while quadratic work on it (10^11
  // steps per match or 10^13 per character) or a catastrophic backtrack runs for hours. How long each takes, and how
  // that grows from 512 KiB to 4 MiB, is bench/hostile-input.ts's figure, not asserted here.
  const FIXTURES = new URL("./redaction-hostile-fixtures.ts", import.meta.url);
  const SIZE = 4 * 1024 * 1024;
  const ends = (what: string, fn: string, args: unknown[]): Promise<Redacted> =>
    finishesUnderCap<Redacted>(what, FIXTURES, fn, args);

  it("redacts 4 MiB of tool output with 5 values, keys and patterns: nothing leaks", async () => {
    const r = await ends("redacting 4 MiB of tool output", "redactToolOutput", [SIZE]);
    assert.equal(r.leaked, false);
    assert.ok(r.outputChars < r.inputChars, "values were replaced");
  });

  for (const label of Object.keys(HOSTILE_SHAPES)) {
    it(`ends on hostile shapes: ${label}`, async () => {
      const r = await ends(`redacting 4 MiB of ${label}`, "redactShape", [label, SIZE]);
      assert.equal(r.leaked, false);
      assert.ok(r.inputChars >= SIZE * 0.9, `${r.inputChars} characters`);
    });
  }

  for (const label of Object.keys(STREAM_SHAPES)) {
    it(`streams hostile shapes, flushing after every chunk, and ends: ${label}`, async () => {
      const r = await ends(`streaming 4 MiB of ${label}`, "streamShape", [label, SIZE]);
      assert.equal(r.leaked, false, "nothing leaks");
    });
  }

  it("streams 4 MiB of tool output in chunks of 512 and ends: nothing leaks", async () => {
    const r = await ends("streaming 4 MiB of tool output", "streamToolOutput", [SIZE]);
    assert.equal(r.leaked, false);
  });
});
