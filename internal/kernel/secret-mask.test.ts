/** Same-length masking of secret values in bytes (workspace snapshots). Pure. */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import { createSecretMask } from "./secret-mask.ts";

const SECRET = "masked-Secret-7731";
const UNICODE = "clé-secrète-ünïcode";

async function* chunks(buf: Buffer, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}
async function masked(buf: Buffer, size: number): Promise<Buffer> {
  const m = createSecretMask([SECRET, UNICODE]);
  assert.ok(m !== undefined);
  const out: Uint8Array[] = [];
  for await (const c of m.stream(chunks(buf, size))) out.push(c);
  return Buffer.concat(out);
}

describe("secret mask", () => {
  it("keeps the length and masks every covered form, however the bytes are split", async () => {
    const dump = execFileSync("xxd", { input: `xx${SECRET}yy` });
    const input = Buffer.concat([
      Buffer.from(`token=${SECRET}\n`),
      Buffer.from(`${SECRET.toUpperCase()} ${Buffer.from(SECRET).toString("base64")}\n`),
      dump,
      Buffer.from(`u=${UNICODE}\n`),
      Buffer.alloc(200_000, 0x61),
      Buffer.from(`tail ${SECRET}`),
    ]);
    for (const size of [1, 7, 512, 65_536, input.length]) {
      const out = await masked(input, size);
      assert.equal(out.length, input.length, `chunks of ${size}: same length`);
      const text = out.toString("latin1");
      for (const form of [SECRET, SECRET.toUpperCase(), Buffer.from(SECRET).toString("base64")])
        assert.ok(!text.includes(form), `chunks of ${size}: ${form}`);
      assert.ok(!out.includes(Buffer.from(UNICODE)), `chunks of ${size}: the UTF-8 value`);
      assert.ok(!text.includes(Buffer.from(SECRET).toString("hex").slice(0, 12)), "the dump's hex");
      assert.match(text, /token=\*{18}\n/);
      assert.ok(text.includes("a".repeat(1000)), "ordinary bytes pass unchanged");
    }
  });

  it("masks names, and is absent without values long enough", () => {
    const m = createSecretMask([SECRET]);
    assert.equal(m?.text(`dir/${SECRET}.txt`), `dir/${"*".repeat(SECRET.length)}.txt`);
    assert.equal(createSecretMask(["abc"]), undefined);
    assert.equal(createSecretMask([]), undefined);
  });
});
