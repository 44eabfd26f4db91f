/** createTenantUploads: at most `max` streams per tenant; refusals name the limit. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import { createTenantUploads } from "./tenant-uploads.ts";

describe("createTenantUploads", () => {
  it("refuses a tenant's stream past the limit, naming it; other tenants are not counted", () => {
    const t = createTenantUploads(2, "--max-uploads-per-tenant");
    const a1 = t.take("acme");
    t.take("acme");
    assert.throws(
      () => t.take("acme"),
      (err: unknown) =>
        isAgentdError(err, "EBUSY") &&
        /--max-uploads-per-tenant/.test(err.message) &&
        /at most 2/.test(err.message),
    );
    const g = t.take("globex");
    assert.equal(t.open("globex"), 1);
    a1();
    a1(); // counts once
    assert.equal(t.open("acme"), 1);
    t.take("acme");
    g();
    assert.equal(t.open("globex"), 0);
  });

  it("refuses a limit that is not a positive integer", () => {
    for (const bad of [0, -1, 1.5, Number.NaN])
      assert.throws(() => createTenantUploads(bad, "--x"), RangeError);
  });
});
