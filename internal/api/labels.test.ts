/** Labels as Kubernetes validates them, and selectors as kubectl writes them. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentdError } from "../errors.ts";
import {
  labelKeyProblem,
  labelValueProblem,
  matchesSelector,
  parseSelector,
  toLabelValue,
  validateLabels,
} from "./labels.ts";

const refusal = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AgentdError, String(err));
    assert.equal(err.code, "EVALIDATION");
    return err.message;
  }
  assert.fail("expected a refusal");
};

describe("labels", () => {
  it("accepts what Kubernetes accepts", () => {
    for (const k of [
      "app",
      "a",
      "ci.example.com/job",
      "A_b-c.d",
      "x".repeat(63),
      `${"a".repeat(253)}/n`,
    ])
      assert.equal(labelKeyProblem(k), undefined, k);
    for (const v of ["", "main", "a1b2c3", "release-1.2_rc", "x".repeat(63)])
      assert.equal(labelValueProblem(v), undefined, v);
  });

  it("refuses what Kubernetes refuses, naming the label", () => {
    for (const k of [
      "",
      "-a",
      "a-",
      "x".repeat(64),
      "a/b/c",
      "Upper.Case/x",
      "/x",
      "p/",
      "a b",
      "__proto__",
      "é",
    ])
      assert.notEqual(labelKeyProblem(k), undefined, JSON.stringify(k));
    for (const v of ["-x", "x-", "a b", "x".repeat(64), "a/b", "https://x", "é", "a\n"])
      assert.notEqual(labelValueProblem(v), undefined, JSON.stringify(v));
    assert.match(
      refusal(() => validateLabels({ ok: "1", "bad key": "v" })),
      /^labels\["bad key"\]: key name/,
    );
    assert.match(
      refusal(() => validateLabels({ k: "a/b" })),
      /^labels\["k"\]: value must be/,
    );
    const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"]));
    assert.match(
      refusal(() => validateLabels(many)),
      /^labels: at most 32/,
    );
  });

  it("toLabelValue makes any text a valid value, keeping long ones apart", () => {
    for (const t of [
      "github.com/org/repo",
      "https://h/x.git",
      "--weird--",
      "é/ü",
      "x".repeat(300),
      "y".repeat(300),
    ])
      assert.equal(labelValueProblem(toLabelValue(t)), undefined, t);
    assert.equal(toLabelValue("github.com/org/repo"), "github.com-org-repo");
    assert.notEqual(toLabelValue(`${"x".repeat(100)}a`), toLabelValue(`${"x".repeat(100)}b`));
  });
});

describe("selectors", () => {
  const labels = { env: "prod", tier: "web", commit: "abc123" };
  const match = (s: string) => matchesSelector(labels, parseSelector(s));

  it("match as kubectl's do", () => {
    const yes = [
      "",
      "env=prod",
      "env==prod",
      "env = prod",
      "env!=dev",
      "missing!=x",
      "env",
      "!missing",
      "env in (prod,dev)",
      "env notin (dev, test)",
      "missing notin (a)",
      "env=prod,tier=web",
      " env , tier ",
    ];
    const no = [
      "env=dev",
      "env!=prod",
      "missing",
      "!env",
      "env in (dev)",
      "missing in (a)",
      "env notin (prod)",
      "env=prod,tier=api",
      "env=",
    ];
    for (const s of yes) assert.equal(match(s), true, s);
    for (const s of no) assert.equal(match(s), false, s);
  });

  it("refuse what they cannot parse, naming the term (never match everything)", () => {
    for (const s of [
      ",",
      "env=prod,",
      "env===x",
      "env in (a",
      "env in a,b)",
      "a b",
      "=x",
      "env=a b",
      "!",
      "env in ((a))",
      "bad key=1",
      "k=a/b",
      "x".repeat(5000),
    ])
      assert.match(
        refusal(() => parseSelector(s)),
        /^label_selector: /,
        s,
      );
  });
});
