/**
 * Secret resolution: placeholders anywhere in a JSON-like input, policy first, providers in
 * order, just in time, never mutating the input and never naming a value in an error.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type AgentdError, isAgentdError } from "../errors.ts";
import {
  createEnvSecretProvider,
  createFileSecretProvider,
  createSecretResolver,
  type SecretProvider,
} from "./secrets.ts";

const TOKEN = "ghp_S3cr3t$&$1\\(.*)+?[x]{2}|^";
const DB = "db-pass-7f3a9c";

function rejectsWith(code: string, ...notIn: string[]) {
  return (err: unknown) => {
    assert.ok(isAgentdError(err), `expected an AgentdError, got ${String(err)}`);
    assert.equal(err.code, code);
    for (const secret of notIn) {
      assert.ok(!err.message.includes(secret), `the message leaks a value: ${err.message}`);
      assert.ok(!JSON.stringify(err).includes(secret));
      assert.ok(!String(err.stack).includes(secret));
    }
    return true;
  };
}

/** A provider that counts lookups and can change its answer (rotation). */
function countingProvider(values: Record<string, string>): SecretProvider & { calls: string[] } {
  const calls: string[] = [];
  return {
    name: "counting",
    calls,
    get(name) {
      calls.push(name);
      return Promise.resolve(Object.hasOwn(values, name) ? values[name] : undefined);
    },
  };
}

describe("createSecretResolver", () => {
  const env = createEnvSecretProvider({ GITHUB_TOKEN: TOKEN, DB_PASSWORD: DB, OTHER: "x-other" });

  it("replaces placeholders nested deep in objects and arrays, several in one string", async () => {
    const r = createSecretResolver({ allow: ["GITHUB_TOKEN", "DB_PASSWORD"], providers: [env] });
    const input = {
      command:
        "curl -H 'Authorization: token $ENV.GITHUB_TOKEN' https://x?p=$ENV.DB_PASSWORD&t=$ENV.GITHUB_TOKEN",
      n: 3,
      ok: true,
      nothing: null,
      deep: [[{ a: [{ b: { c: ["pre $ENV.DB_PASSWORD post", 1] } }] }]],
    };
    const before = structuredClone(input);
    const { value, used } = await r.resolve(input);
    assert.deepEqual(value, {
      command: `curl -H 'Authorization: token ${TOKEN}' https://x?p=${DB}&t=${TOKEN}`,
      n: 3,
      ok: true,
      nothing: null,
      deep: [[{ a: [{ b: { c: [`pre ${DB} post`, 1] } }] }]],
    });
    assert.deepEqual(used, ["GITHUB_TOKEN", "DB_PASSWORD"]);
    assert.deepEqual(input, before, "the input keeps its placeholders");
    assert.deepEqual([...r.knownValues()].sort(), [DB, TOKEN].sort());
  });

  it("inserts values literally: regex specials and `$&` are not replacement patterns", async () => {
    const r = createSecretResolver({ allow: ["GITHUB_TOKEN"], providers: [env] });
    const { value } = await r.resolve("[$ENV.GITHUB_TOKEN]");
    assert.equal(value, `[${TOKEN}]`);
  });

  it("does not expand a placeholder inside a resolved value", async () => {
    const p = countingProvider({ A: "value-with-$ENV.B-inside", B: "bbbb" });
    const r = createSecretResolver({ allow: ["A", "B"], providers: [p] });
    const { value, used } = await r.resolve("$ENV.A");
    assert.equal(value, "value-with-$ENV.B-inside");
    assert.deepEqual(used, ["A"]);
  });

  it("returns a copy even without placeholders, and keeps keys as they are", async () => {
    const r = createSecretResolver({ allow: [], providers: [env] });
    const input = JSON.parse('{"a":{"b":[1,"x"]},"$ENV.X":"k","__proto__":{"polluted":1}}');
    const { value, used } = await r.resolve(input);
    assert.deepEqual(value, input);
    assert.notEqual(value, input);
    assert.notEqual((value as { a: unknown }).a, input.a);
    assert.deepEqual(used, []);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.ok(Object.hasOwn(value as object, "__proto__"));
    assert.equal(Object.getPrototypeOf(value), Object.prototype);
  });

  it("refuses a name that is not allowed, naming it and policy secrets.allow", async () => {
    const r = createSecretResolver({ allow: ["GITHUB_TOKEN"], providers: [env] });
    await assert.rejects(
      r.resolve({ cmd: ["echo $ENV.GITHUB_TOKEN $ENV.DB_PASSWORD"] }),
      (err: unknown) => {
        rejectsWith("EPERMISSION", TOKEN, DB)(err);
        const e = err as AgentdError;
        assert.match(e.message, /DB_PASSWORD/);
        assert.match(e.message, /secrets\.allow/);
        assert.equal(e.field, "input.cmd[0]");
        return true;
      },
    );
    assert.deepEqual(r.knownValues(), [], "nothing resolved when the call is refused");
  });

  it("refuses lower-case and odd names (never in the allow list)", async () => {
    const r = createSecretResolver({ allow: ["GITHUB_TOKEN"], providers: [env] });
    await assert.rejects(r.resolve("$ENV.github_token"), rejectsWith("EPERMISSION"));
    await assert.rejects(r.resolve("$ENV.constructor"), rejectsWith("EPERMISSION"));
    await assert.rejects(r.resolve("$ENV.__proto__"), rejectsWith("EPERMISSION"));
  });

  it("checks policy before asking any provider", async () => {
    const p = countingProvider({ A: "aaaa" });
    const r = createSecretResolver({ allow: ["A"], providers: [p] });
    await assert.rejects(r.resolve(["$ENV.A", "$ENV.NOPE"]), rejectsWith("EPERMISSION"));
    assert.deepEqual(p.calls, []);
  });

  it("fails an allowed name no provider has with ESECRET_NOT_FOUND naming it", async () => {
    const r = createSecretResolver({
      allow: ["GITHUB_TOKEN", "MISSING"],
      providers: [env, createFileSecretProvider("/nonexistent-dir-for-test")],
    });
    await assert.rejects(
      r.resolve({ a: "$ENV.GITHUB_TOKEN", b: "$ENV.MISSING" }),
      (err: unknown) => {
        rejectsWith("ESECRET_NOT_FOUND", TOKEN)(err);
        const e = err as AgentdError;
        assert.match(e.message, /MISSING/);
        assert.match(e.message, /env, file:\/nonexistent-dir-for-test/);
        assert.equal(e.field, "input.b");
        return true;
      },
    );
    assert.deepEqual(r.knownValues(), [], "a failed call reveals nothing to the redactor list");
  });

  it("a $ENV.../x traversal cannot even match the placeholder", async () => {
    const r = createSecretResolver({ allow: [], providers: [env] });
    const { value, used } = await r.resolve("cat $ENV.../x and $ENV./etc/passwd");
    assert.equal(value, "cat $ENV.../x and $ENV./etc/passwd");
    assert.deepEqual(used, []);
  });

  it("asks providers in order, just in time (a rotated value is picked up), each name once", async () => {
    const values: Record<string, string> = { A: "first-value" };
    const first = countingProvider(values);
    const second = countingProvider({ A: "shadowed", B: "from-second" });
    const r = createSecretResolver({ allow: ["A", "B"], providers: [first, second] });
    const one = await r.resolve(["$ENV.A $ENV.A", "$ENV.B", { x: "$ENV.A" }]);
    assert.deepEqual(one.value, ["first-value first-value", "from-second", { x: "first-value" }]);
    assert.deepEqual(first.calls, ["A", "B"]);
    assert.deepEqual(second.calls, ["B"]);
    values.A = "rotated-value";
    const two = await r.resolve("$ENV.A");
    assert.equal(two.value, "rotated-value");
    assert.deepEqual([...r.knownValues()], ["first-value", "from-second", "rotated-value"]);
  });

  it("knownValues keeps its identity until a new value is added", async () => {
    const r = createSecretResolver({ allow: ["GITHUB_TOKEN", "DB_PASSWORD"], providers: [env] });
    const empty = r.knownValues();
    await r.resolve("$ENV.GITHUB_TOKEN");
    const one = r.knownValues();
    assert.notEqual(one, empty);
    await r.resolve("$ENV.GITHUB_TOKEN again");
    assert.equal(r.knownValues(), one);
    await r.resolve("$ENV.DB_PASSWORD");
    assert.notEqual(r.knownValues(), one);
    assert.ok(Object.isFrozen(r.knownValues()));
  });

  it("refuses input that is not JSON-like, cyclic or absurdly deep", async () => {
    const r = createSecretResolver({ allow: [], providers: [env] });
    const cyclic: Record<string, unknown> = { a: "x" };
    cyclic.self = cyclic;
    await assert.rejects(r.resolve(cyclic), rejectsWith("EVALIDATION"));
    await assert.rejects(r.resolve({ f: () => 1 }), rejectsWith("EVALIDATION"));
    await assert.rejects(r.resolve({ d: new Date() }), rejectsWith("EVALIDATION"));
    let deep: unknown = "$ENV.X";
    for (let i = 0; i < 100; i++) deep = [deep];
    await assert.rejects(r.resolve(deep), rejectsWith("EVALIDATION"));
    // shared (not cyclic) references are fine
    const shared = { s: "v" };
    const { value } = await r.resolve({ a: shared, b: shared });
    assert.deepEqual(value, { a: { s: "v" }, b: { s: "v" } });
  });

  it("wraps a failing custom provider in EIO without its value", async () => {
    const broken: SecretProvider = {
      name: "broken",
      get: () => Promise.reject(new Error("backend down")),
    };
    const r = createSecretResolver({ allow: ["A"], providers: [broken] });
    await assert.rejects(r.resolve("$ENV.A"), (err: unknown) => {
      rejectsWith("EIO")(err);
      assert.match((err as Error).message, /broken.*A/);
      return true;
    });
  });
});

describe("createEnvSecretProvider", () => {
  it("reads own keys only", async () => {
    const p = createEnvSecretProvider({ A: "aaaa", U: undefined });
    assert.equal(await p.get("A"), "aaaa");
    assert.equal(await p.get("U"), undefined);
    assert.equal(await p.get("B"), undefined);
    assert.equal(await p.get("constructor"), undefined);
    assert.equal(await p.get("__proto__"), undefined);
    assert.equal(await p.get("toString"), undefined);
  });
});

describe("createFileSecretProvider", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "agentd-secrets-"));
    await writeFile(join(dir, "API_KEY"), "file-secret-value\n");
    await writeFile(join(dir, "CRLF"), "crlf-value\r\n");
    await writeFile(join(dir, "TWO_NL"), "two-newlines\n\n");
    await writeFile(join(dir, "NO_NL"), "no-newline");
    await writeFile(join(dir, "EMPTY"), "");
    await mkdir(join(dir, "A_DIR"));
    await writeFile(join(dir, "LOCKED"), "locked-secret-value");
    await chmod(join(dir, "LOCKED"), 0o000);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reads DIR/NAME and trims one trailing line ending", async () => {
    const p = createFileSecretProvider(dir);
    assert.equal(p.name, `file:${dir}`);
    assert.equal(await p.get("API_KEY"), "file-secret-value");
    assert.equal(await p.get("CRLF"), "crlf-value");
    assert.equal(await p.get("TWO_NL"), "two-newlines\n");
    assert.equal(await p.get("NO_NL"), "no-newline");
    assert.equal(await p.get("EMPTY"), "");
  });

  it("a missing file is undefined; a missing directory too", async () => {
    assert.equal(await createFileSecretProvider(dir).get("NOT_THERE"), undefined);
    assert.equal(await createFileSecretProvider(join(dir, "nope")).get("API_KEY"), undefined);
  });

  it("refuses names that could leave the directory or are not env-style", async () => {
    const p = createFileSecretProvider(dir);
    for (const bad of [
      "../etc/passwd",
      "/etc/passwd",
      "..",
      ".",
      "a/b",
      "api_key",
      "A-B",
      "",
      "A\0B",
      "1ABC",
    ]) {
      await assert.rejects(p.get(bad), rejectsWith("EVALIDATION"), bad);
    }
  });

  it("other IO errors are EIO naming the file, never its content", async () => {
    const p = createFileSecretProvider(dir);
    await assert.rejects(p.get("A_DIR"), (err: unknown) => {
      rejectsWith("EIO")(err);
      assert.match((err as Error).message, /A_DIR/);
      return true;
    });
  });

  it("feeds the resolver", async () => {
    const r = createSecretResolver({
      allow: ["API_KEY"],
      providers: [createEnvSecretProvider({}), createFileSecretProvider(dir)],
    });
    const { value } = await r.resolve({ headers: { "x-api-key": "$ENV.API_KEY" } });
    assert.deepEqual(value, { headers: { "x-api-key": "file-secret-value" } });
  });
});
