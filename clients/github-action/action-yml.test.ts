/**
 * action.yml's structure, as GitHub reads it: a composite action whose one bash step runs
 * run.sh; every input it uses is declared and every declared input reaches the script (as
 * the INPUT_* variable inputs.ts reads); every output maps to an output the script writes;
 * no `${{ }}` expression inside `run:` (a value there would be pasted into the script).
 * Also: the inputs read from a runner's environment, hostile values refused by name.
 */
import assert from "node:assert/strict";
import { accessSync, constants, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parse } from "yaml";
import { OUTPUT_NAMES } from "./action.ts";
import { defaultIdempotencyKey, InputError, readInputs, repoLabel } from "./inputs.ts";
import { ACTION_DIR, evalInputs, readActionYml } from "./runner-fixture.ts";

const yml = readActionYml();
const step = yml.runs.steps[0];

describe("action.yml", () => {
  it("is a composite action with one bash step that runs run.sh (executable)", () => {
    assert.equal(yml.runs.using, "composite");
    assert.equal(yml.runs.steps.length, 1);
    assert.equal(step?.shell, "bash");
    assert.equal(step?.run, 'exec "$GITHUB_ACTION_PATH/run.sh"');
    accessSync(join(ACTION_DIR, "run.sh"), constants.X_OK);
    assert.ok(!String(step?.run).includes("${{"), "no expression pasted into the script");
  });

  it("maps every declared input to INPUT_NAME, and uses no undeclared one", () => {
    const declared = Object.keys(yml.inputs).sort();
    const env = step?.env ?? {};
    const mapped = Object.entries(env).map(([k, v]) => {
      const m = /^\$\{\{ inputs\.([a-z-]+) \}\}$/.exec(v);
      assert.ok(m, `env ${k} is not \${{ inputs.NAME }}: ${v}`);
      assert.equal(
        k,
        `INPUT_${(m[1] as string).toUpperCase().replace(/-/g, "_")}`,
        `${k} is named after its input`,
      );
      return m[1] as string;
    });
    assert.deepEqual(mapped.sort(), declared);
    assert.throws(() => evalInputs(`$${"{{"} inputs.nope }}`, {}), /not declared/);
  });

  it("reads in the script every input it declares", () => {
    const sources = ["inputs.ts", "run.sh"]
      .map((f) => readFileSync(join(ACTION_DIR, f), "utf8"))
      .join("\n");
    for (const name of Object.keys(yml.inputs)) {
      const envName = `INPUT_${name.toUpperCase().replace(/-/g, "_")}`;
      assert.ok(
        sources.includes(`"${name}"`) || sources.includes(envName),
        `input ${name} is never read`,
      );
    }
  });

  it("required inputs have no default; optional ones have one", () => {
    for (const [name, spec] of Object.entries(yml.inputs)) {
      if (spec.required === true) assert.equal(spec.default, undefined, name);
      else assert.equal(typeof spec.default, "string", `${name} has a string default`);
    }
    assert.deepEqual(
      Object.entries(yml.inputs)
        .filter(([, s]) => s.required === true)
        .map(([n]) => n)
        .sort(),
      ["address", "prompt"],
    );
  });

  it("maps every output to an output the script writes, and the script writes no other", () => {
    const mapped = Object.entries(yml.outputs).map(([name, o]) => {
      const m = /^\$\{\{ steps\.run\.outputs\.([a-z-]+) \}\}$/.exec(o.value);
      assert.ok(m, `output ${name}: ${o.value}`);
      assert.equal(m[1], name);
      return name;
    });
    assert.equal(step?.id, "run");
    assert.deepEqual(mapped.sort(), [...OUTPUT_NAMES].sort());
  });
});

describe("docs/ci.md's workflows", () => {
  it("give the action only declared inputs, and every required one", () => {
    const doc = readFileSync(join(ACTION_DIR, "..", "..", "docs", "ci.md"), "utf8");
    const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    let uses = 0;
    for (const block of blocks) {
      // A fragment of steps (indented) parses once dedented.
      const indent = Math.min(
        ...block
          .split("\n")
          .filter((l) => l.trim() !== "")
          .map((l) => /^ */.exec(l)?.[0].length ?? 0),
      );
      const parsed: unknown = parse(
        block
          .split("\n")
          .map((l) => l.slice(indent))
          .join("\n"),
      );
      const steps: { uses?: string; with?: Record<string, unknown> }[] = [];
      const walk = (v: unknown): void => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v !== null && typeof v === "object") {
          const o = v as { uses?: unknown };
          if (typeof o.uses === "string" && o.uses.includes("/clients/github-action@"))
            steps.push(o as (typeof steps)[number]);
          Object.values(v).forEach(walk);
        }
      };
      walk(parsed);
      for (const s of steps) {
        uses++;
        for (const name of Object.keys(s.with ?? {}))
          assert.ok(name in yml.inputs, `docs/ci.md gives undeclared input ${name}`);
        for (const [name, spec] of Object.entries(yml.inputs))
          if (spec.required === true)
            assert.ok(name in (s.with ?? {}), `docs/ci.md leaves out required input ${name}`);
      }
    }
    assert.ok(uses >= 3, `docs/ci.md shows the action in use (found ${uses})`);
  });
});

describe("inputs from a runner's environment", () => {
  const env = {
    INPUT_ADDRESS: "https://agentd.example:7443",
    INPUT_TOKEN: "  tok-123\n",
    INPUT_PROMPT: "fix it",
    INPUT_LABELS: "a=1, b=2\nc=",
    INPUT_WAIT_FOR_APPROVAL: "False",
    GITHUB_RUN_ID: "42",
    GITHUB_JOB: "agent",
    GITHUB_REPOSITORY: "acme/widgets",
    GITHUB_WORKSPACE: "/w",
    INPUT_REPO: "sub",
  };

  it("reads lists, booleans, the repo and the console base", () => {
    const i = readInputs(env);
    assert.equal(i.token, "tok-123", "surrounding whitespace of a pasted secret is dropped");
    assert.deepEqual(i.labels, ["a=1", "b=2", "c=", "repo=github.com-acme-widgets"]);
    const own = readInputs({
      ...env,
      INPUT_LABELS: "repo=mine",
      GITHUB_SERVER_URL: "https://ghe.example",
    });
    assert.deepEqual(own.labels, ["repo=mine"], "a repo label given wins");
    assert.deepEqual(
      readInputs({ ...env, GITHUB_SERVER_URL: "https://ghe.example" }).labels.at(-1),
      "repo=ghe.example-acme-widgets",
    );
    assert.equal(
      repoLabel({ GITHUB_REPOSITORY: `o/${"n".repeat(80)}` })?.length,
      "repo=".length + 63,
    );
    assert.equal(i.waitForApproval, false);
    assert.equal(i.repo, "/w/sub");
    assert.equal(i.consoleBase, "https://agentd.example:7443");
    assert.equal(
      readInputs({ ...env, INPUT_ADDRESS: "10.0.0.1:7070" }).consoleBase,
      "http://10.0.0.1:7070",
    );
    assert.equal(
      readInputs({ ...env, INPUT_CONSOLE_URL: "https://c.example/agentd/?x#y" }).consoleBase,
      "https://c.example/agentd",
    );
  });

  it("derives the same key for a re-run and another for another prompt or job", () => {
    const key = readInputs(env).idempotencyKey;
    assert.match(key, /^gh:acme\/widgets:42:agent:[0-9a-f]{16}$/);
    assert.equal(readInputs({ ...env, GITHUB_RUN_ATTEMPT: "2" }).idempotencyKey, key);
    assert.notEqual(readInputs({ ...env, INPUT_PROMPT: "other" }).idempotencyKey, key);
    assert.notEqual(readInputs({ ...env, GITHUB_JOB: "other" }).idempotencyKey, key);
    assert.match(
      defaultIdempotencyKey({ GITHUB_RUN_ID: "1", GITHUB_JOB: "a b$" }, []),
      /^gh::1:a_b_:/,
    );
    assert.throws(() => defaultIdempotencyKey({}, []), /GITHUB_RUN_ID/);
  });

  it("refuses hostile values, naming the input and never echoing the token", () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{ INPUT_ADDRESS: "" }, /input address is required/],
      [{ INPUT_ADDRESS: "ftp://h" }, /input address: only http/],
      [{ INPUT_ADDRESS: "https://u:p@h" }, /input address must not hold credentials/],
      [{ INPUT_TOKEN: "secret-part other-part" }, /input token holds whitespace/],
      [{ INPUT_PROMPT: "a\u0000b" }, /input prompt holds a NUL/],
      [{ INPUT_LABELS: "a=b=c" }, /input labels/],
      [{ INPUT_LABELS: "a b=c" }, /input labels/],
      [{ INPUT_IDEMPOTENCY_KEY: "x".repeat(256) }, /input idempotency-key/],
      [{ INPUT_IDEMPOTENCY_KEY: "a\nb" }, /input idempotency-key/],
      [{ INPUT_WAIT_FOR_APPROVAL: "1" }, /input wait-for-approval/],
      [{ INPUT_CONSOLE_URL: "javascript:alert(1)" }, /input console-url/],
      [{ INPUT_CONSOLE_URL: "https://u:p@h" }, /input console-url must not hold credentials/],
    ];
    for (const [override, want] of bad) {
      assert.throws(
        () => readInputs({ ...env, ...override }),
        (err: unknown) =>
          err instanceof InputError &&
          want.test(err.message) &&
          !err.message.includes("secret-part"),
        JSON.stringify(override),
      );
    }
  });
});
