import assert from "node:assert/strict";
import { it } from "node:test";
import { UsageError } from "./config.ts";
import { crashPointFrom } from "./crash-at.ts";

it("AGENTD_TEST_CRASH_AT unset or empty: no hook at all", () => {
  assert.equal(crashPointFrom({}), undefined);
  assert.equal(crashPointFrom({ AGENTD_TEST_CRASH_AT: "" }), undefined);
});

for (const bad of ["createRun.afterClam", "createRun.afterClaim,,", "rm -rf /", "x".repeat(500)]) {
  it(`AGENTD_TEST_CRASH_AT=${JSON.stringify(bad.slice(0, 24))}: refused, naming the variable and the points`, () => {
    assert.throws(
      () => crashPointFrom({ AGENTD_TEST_CRASH_AT: bad }),
      (e: unknown) =>
        e instanceof UsageError &&
        /^AGENTD_TEST_CRASH_AT: /.test(e.message) &&
        /createRun\.afterAdmit/.test(e.message) &&
        e.message.length < 400,
    );
  });
}

it("a known point gives a hook that leaves every other point alone", () => {
  const hook = crashPointFrom({ AGENTD_TEST_CRASH_AT: " createRun.afterAdmit " });
  assert.equal(typeof hook, "function");
  // Any point but the named one returns (this process is still here to assert it).
  hook?.("createRun.afterClaim");
  hook?.("createRun.afterAppend");
});
