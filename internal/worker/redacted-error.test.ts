/** An error escaping a drive carries no secret value in its message, stack or causes. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AgentdError } from "../errors.ts";
import { createRunSecrets } from "../kernel/run-secrets.ts";
import { redactError } from "./redacted-error.ts";

const SECRET = "s3cr3t-value-0123456789";

describe("redactError", () => {
  it("hides the value from message, stack and every cause, keeping the error itself", () => {
    const inner = new Error(`connect to https://u:${SECRET}@db failed`);
    const outer = new AgentdError("EUNAVAILABLE", `wrapped ${SECRET}`, { cause: inner });
    const got = redactError(outer, createRunSecrets([SECRET]));
    assert.equal(got, outer);
    assert.ok(got instanceof AgentdError);
    assert.equal(outer.code, "EUNAVAILABLE");
    for (const e of [outer, inner]) {
      assert.equal(e.message.includes(SECRET), false, e.message);
      assert.equal(String(e.stack).includes(SECRET), false, e.stack);
      assert.match(e.message, /\[REDACTED\]/);
    }
  });

  it("leaves a frozen error, a string and a cause cycle alone without throwing", () => {
    const frozen = Object.freeze(new Error(SECRET));
    assert.equal(redactError(frozen, createRunSecrets([SECRET])), frozen);
    assert.equal(redactError(SECRET, createRunSecrets([SECRET])), SECRET);
    const a = new Error(`a ${SECRET}`);
    const b = new Error(`b ${SECRET}`, { cause: a });
    (a as { cause?: unknown }).cause = b;
    redactError(b, createRunSecrets([SECRET]));
    assert.equal(a.message.includes(SECRET), false);
  });

  it("returns the error untouched when the run has no secret", () => {
    const e = new Error("nothing to hide");
    const stack = e.stack;
    assert.equal(redactError(e, createRunSecrets()), e);
    assert.equal(e.stack, stack);
  });
});
