/**
 * Live redaction: what `flush` emits and holds back, a line every 200 ms coming out on the
 * next timer tick (with node:test's mock timers), and the stream's two guarantees checked
 * as properties over random values, forms (real hex dumps included), splits and flushes:
 * nothing emitted holds a covered form, and the output equals `text(whole)`.
 */
import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import { createRedactor, createStreamRedactor, REDACTED, type Redactor } from "./redaction.ts";
import {
  BUSYBOX,
  containsBytes,
  decode,
  dumpAll,
  type Format,
  GNU,
} from "./redaction-dump-fixtures.ts";

const TOKEN = "ghp_0123456789abcdefABCDEF";

describe("StreamRedactor.flush", () => {
  const r = createRedactor({ secrets: () => [TOKEN] });

  it("emits everything but a tail that could begin a form of a value", () => {
    const s = createStreamRedactor(r, 4096);
    assert.equal(s.push("building...\nusing ghp_0123"), "", "push holds maxSecretLength back");
    assert.equal(s.flush(), "building...\nusing ");
    assert.equal(s.flush(), "", "nothing new: nothing to do");
    assert.equal(s.push("456789abcdefABCDEF done\n"), "");
    assert.equal(s.flush(), `${REDACTED} done\n`);
    assert.equal(s.end(), "");
  });

  it("holds the start of a form in another case, reversed, or in hex", () => {
    for (const [head, rest] of [
      ["GHP_0123456", "789ABCDEFABCDEF"],
      [[...TOKEN].reverse().join("").slice(0, 9), [...TOKEN].reverse().join("").slice(9)],
      [
        Buffer.from(TOKEN).toString("hex").slice(0, 20),
        Buffer.from(TOKEN).toString("hex").slice(20),
      ],
    ] as const) {
      const s = createStreamRedactor(r, 4096);
      s.push(`x ${head}`);
      assert.equal(s.flush(), "x ", head);
      s.push(`${rest} y\n`);
      assert.equal(s.flush() + s.end(), `${REDACTED} y\n`, head);
    }
  });

  it("holds whole dump lines whose bytes end with the start of a value", () => {
    const s = createStreamRedactor(r, 4096);
    const line1 = "00000000: 7878 7878 7878 7878 7878 7878 6768 705f  xxxxxxxxxxxxghp_\n";
    const line2 = "00000010: 3031 3233 3435 3637 3839 6162 6364 6566  0123456789abcdef\n";
    const line3 = "00000020: 4142 4344 4546 0a                        ABCDEF.\n";
    s.push(line1);
    assert.equal(s.flush(), "", "the line ends with the first bytes of the value");
    s.push(line2);
    assert.equal(s.flush(), "");
    s.push(line3);
    assert.equal(s.flush(), `${REDACTED}\n`);
  });

  it("holds a line still printing that may be a dump, and lets go of one that is not", () => {
    const s = createStreamRedactor(r, 4096);
    s.push("00000000: 6768 705f");
    assert.equal(s.flush(), "", "a dump line still printing");
    s.push(" 3031  ghp_01\n");
    assert.equal(s.flush(), "", "its line ended with the start of the value: held");
    s.push("00000006: 7878                 xx\n");
    assert.equal(
      s.flush(),
      "00000000: 6768 705f 3031  ghp_01\n00000006: 7878                 xx\n",
      "the value did not go on",
    );
    s.push("ffff then words");
    assert.equal(s.flush(), "ffff then words", "its bytes are decided and hold no value start");
    s.push(" and a line end\ntick 1");
    assert.equal(s.flush(), " and a line end\ntick 1");
  });

  it("with key or pattern rules, emits whole lines and holds a keyed value still printing", () => {
    const rk = createRedactor({ secrets: () => [TOKEN], keys: ["TOKEN"], patterns: ["sk-[a-z]+"] });
    const s = createStreamRedactor(rk, 4096);
    s.push("first line\nGITHUB_TOKEN=abc");
    assert.equal(s.flush(), "first line\n");
    s.push("def sk-abc");
    assert.equal(s.flush(), "");
    s.push("xyz\n");
    assert.equal(s.flush(), `GITHUB_TOKEN=${REDACTED} ${REDACTED}\n`);
  });

  it("answers nothing after end, and push after end still throws", () => {
    const s = createStreamRedactor(r, 16);
    s.push("abc");
    assert.equal(s.end(), "abc");
    assert.equal(s.flush(), "");
    assert.throws(() => s.push("x"));
  });
});

describe("a forced flush (over 1 MiB held)", () => {
  it("never cuts through a value: a value repeated for 3 MiB comes out redacted whole", () => {
    // A run of matches is held whole until the buffer is forced out at 1 MiB; the forced cut
    // once went through the value it landed in, and the value's two halves went out bare.
    const r = createRedactor({ secrets: () => [TOKEN] });
    for (const [chunk, max] of [
      [512, 256],
      [4096, 4096],
      [16384, 0],
    ] as const) {
      const s = createStreamRedactor(r, max);
      const text = TOKEN.repeat(Math.ceil((3 * 1024 * 1024) / TOKEN.length));
      let out = "";
      for (let i = 0; i < text.length; i += chunk) out += s.push(text.slice(i, i + chunk));
      out += s.end();
      assert.ok(!out.includes(TOKEN), `chunks of ${chunk}: the value went out`);
      assert.match(out, /^(\[REDACTED\])+$/, `chunks of ${chunk}: only redactions`);
    }
  });
});

describe("live output on a timer", () => {
  it("a line printed every 200 ms comes out on the next 100 ms flush, secrets hidden", () => {
    mock.timers.enable({ apis: ["setInterval", "setTimeout"] });
    try {
      const r = createRedactor({
        secrets: () => [TOKEN, "db-pass-7f3a9c"],
        keys: ["TOKEN", "PASSWORD"],
        patterns: ["sk-[A-Za-z0-9]{20,}"],
      });
      const s = createStreamRedactor(r, 4096);
      const shown: { at: number; text: string }[] = [];
      let now = 0;
      const timer = setInterval(() => {
        const text = s.flush();
        if (text !== "") shown.push({ at: now, text });
      }, 100);
      const printed: { at: number; line: string }[] = [];
      let n = 0;
      const printer = setInterval(() => {
        const line =
          n % 4 === 1
            ? `step ${n}: ${TOKEN}\n`
            : n % 4 === 2
              ? `GITHUB_TOKEN=v${n}\n`
              : `tick ${n}\n`;
        printed.push({ at: now, line });
        s.push(line);
        if (++n === 19) clearInterval(printer);
      }, 200);
      for (now = 0; now < 4000; ) {
        now += 50;
        mock.timers.tick(50);
      }
      clearInterval(timer);
      clearInterval(printer);
      assert.equal(shown.length, printed.length, "one emission per line");
      shown.forEach((e, i) => {
        const p = printed[i] as { at: number; line: string };
        assert.ok(e.at - p.at <= 100, `line ${i} waited ${e.at - p.at} ms`);
        assert.equal(e.text, r.text(p.line));
      });
      assert.ok(!shown.some((e) => e.text.includes(TOKEN) || /TOKEN=v/.test(e.text)));
    } finally {
      mock.timers.reset();
    }
  });
});

/** A seeded generator, so a failing round can be replayed. */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x100000000;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)] as T,
  };
}

/** Fixed values (their dumps come from the real tools once) of every kind of character. */
const POOL = [
  TOKEN,
  "p4$$.w*rd+(x)?[a-z]{2}|^\\d/",
  "s3cret wörd & more=€/ok",
  "two\nline-secret",
  "abcd",
  "Zq9-key-\u{1F511}-end",
];
const DUMP_FORMATS: Format[] = [...GNU, ...BUSYBOX].filter((f) =>
  [
    "xxd",
    "xxd -p",
    "od -An -tx1",
    "od -x",
    "hexdump -C",
    "busybox xxd",
    "busybox od -tx1",
    "busybox hexdump",
  ].includes(f.name),
);

describe("stream guarantees, as properties", () => {
  /** Each pool value at offsets 0..17, dumped by each format. */
  const inputs: { value: string; input: Buffer }[] = [];
  for (const value of POOL) {
    for (let offset = 0; offset <= 17; offset++) {
      const around = Buffer.from(`#${offset}# some bytes around\u0001\u00ff the value .....`);
      const input = Buffer.concat([
        around.subarray(0, offset),
        Buffer.from(value),
        around.subarray(offset),
      ]);
      inputs.push({ value, input });
    }
  }
  const dumps = dumpAll(
    inputs.map((i) => i.input),
    DUMP_FORMATS,
  );

  function formOf(value: string, g: ReturnType<typeof rng>): string {
    const utf8 = Buffer.from(value);
    const mixed = [...value]
      .map((c) => (g.next() < 0.5 ? c.toUpperCase() : c.toLowerCase()))
      .join("");
    const blob = Buffer.concat([Buffer.from("x".repeat(g.int(4))), utf8, Buffer.from("yz")]);
    const forms = [
      value,
      value.toUpperCase(),
      mixed,
      [...value].reverse().join(""),
      JSON.stringify(value).slice(1, -1),
      encodeURIComponent(value),
      utf8.toString("base64"),
      blob.toString("base64"),
      utf8.toString("hex"),
      utf8.toString("hex").toUpperCase(),
    ];
    if (g.next() < 0.35 && POOL.includes(value)) {
      const f = g.pick(DUMP_FORMATS);
      const candidates = inputs.flatMap((x, i) => (x.value === value ? [i] : []));
      return (dumps.get(f.name) as string[])[g.pick(candidates)] as string;
    }
    return `using ${g.pick(forms)} now`;
  }

  /** A value of 4 to 30 characters of every kind (no real dump of it: literal forms only). */
  function randomValue(g: ReturnType<typeof rng>): string {
    const alphabet = [..."abcXYZ019_-.$*+?()[]{}|^\\/\"'&=% \t\néü€\u{1F511}"];
    let v = "";
    for (let n = 4 + g.int(27); [...v].length < n; ) v += g.pick(alphabet);
    return v;
  }

  function ordinary(i: number, g: ReturnType<typeof rng>): string {
    return g.pick([
      `plain line ${i} ${"-".repeat(g.int(30))}`,
      `PASS src/module-${i}.test.ts (${i % 97} ms) ✓ ümlauts €`,
      `export GITHUB_TOKEN=value-${i}`,
      `{"password": "pw ${i}", "n": ${i}}`,
      `key sk-${"Ab1".repeat(8)}${i}`,
      `ffff ${i} hex-looking start`,
      `00000000: 6869 2074 6865 7265  hi there`,
      `progress ${i}%\r`,
      "",
    ]);
  }

  function text(values: string[], g: ReturnType<typeof rng>): string {
    const lines: string[] = [];
    const n = 20 + g.int(40);
    for (let i = 0; i < n; i++) {
      lines.push(g.next() < 0.3 ? formOf(g.pick(values), g) : ordinary(i, g));
    }
    let t = lines.join("\n");
    if (g.next() < 0.7) t += "\n";
    return t;
  }

  /** The pieces between redactions hold no covered form of any value. */
  function assertNoForm(out: string, values: string[], rounds: string) {
    const check = createRedactor({ secrets: () => values });
    for (const piece of out.split(REDACTED)) {
      assert.equal(check.text(piece), piece, `${rounds}: a form left in ${JSON.stringify(piece)}`);
      for (const v of values) {
        assert.ok(!piece.toLowerCase().includes(v.toLowerCase()), rounds);
        for (const f of DUMP_FORMATS) {
          assert.ok(!containsBytes(decode(piece, f).bytes, Buffer.from(v)), `${rounds} ${f.name}`);
        }
      }
    }
  }

  function roundOf(seed: number, rules: boolean, maxChunk: number, flushChance: number) {
    const g = rng(seed);
    const values = [...new Set([g.pick(POOL), g.pick(POOL), g.pick(POOL)])].slice(0, 1 + g.int(3));
    if (g.next() < 0.5) values.push(randomValue(g));
    const r: Redactor = createRedactor({
      secrets: () => values,
      keys: rules ? ["TOKEN", "PASSWORD"] : [],
      patterns: rules ? ["sk-[A-Za-z0-9]{20,}"] : [],
    });
    const whole = text(values, g);
    const s = createStreamRedactor(r, g.pick([0, 16, 256, 4096]));
    let out = "";
    let flushed = 0;
    for (let at = 0; at < whole.length; ) {
      const n = 1 + g.int(maxChunk);
      out += s.push(whole.slice(at, at + n));
      at += n;
      // Sometimes more than one flush in a row (timer ticks with no output in between).
      for (let k = 0; k < 3 && g.next() < flushChance; k++) {
        const piece = s.flush();
        flushed += piece.length;
        out += piece;
      }
    }
    out += s.end();
    const label = `seed ${seed} rules ${rules} chunk ${maxChunk}`;
    assert.equal(out, r.text(whole), label);
    assertNoForm(out, values, label);
    return { flushed, whole };
  }

  it("output equals text(whole) and holds no form, for random splits and flushes", () => {
    let flushed = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const rules = seed % 2 === 0;
      const chunk = seed % 3 === 0 ? 3 : seed % 3 === 1 ? 40 : 700;
      flushed += roundOf(seed, rules, chunk, seed % 5 === 0 ? 0.9 : 0.4).flushed;
    }
    assert.ok(flushed > 0, "flushes emit early");
  });

  it("flushing after every character keeps both guarantees", () => {
    for (let seed = 1000; seed < 1030; seed++) roundOf(seed, seed % 2 === 0, 1, 1);
  });
});
