/** The "did you mean" suggestions: edit distances and which names are close enough. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { closest, didYouMean, levenshtein } from "./suggest.ts";

const COMMANDS = ["run", "runs", "get", "events", "wait", "replay", "approve", "approvals"];

describe("levenshtein", () => {
  it("counts insertions, deletions, substitutions and neighbour swaps", () => {
    assert.equal(levenshtein("", ""), 0);
    assert.equal(levenshtein("", "abc"), 3);
    assert.equal(levenshtein("kitten", "sitting"), 3);
    assert.equal(levenshtein("wiat", "wait"), 1);
    assert.equal(levenshtein("evnts", "events"), 1);
    assert.equal(levenshtein("get", "got"), 1);
  });
});

describe("closest", () => {
  it("suggests the nearest names and nothing for far ones", () => {
    assert.deepEqual(closest("wiat", COMMANDS), ["wait"]);
    assert.deepEqual(closest("evnts", COMMANDS), ["events"]);
    assert.deepEqual(closest("aprove", COMMANDS), ["approve"]);
    assert.deepEqual(closest("frobnicate", COMMANDS), []);
    assert.deepEqual(closest("x", COMMANDS), []);
  });
  it("counts a started name as close", () => {
    assert.deepEqual(closest("appro", COMMANDS).sort(), ["approvals", "approve"]);
  });
  it("formats the hint with a prefix, or nothing", () => {
    assert.equal(didYouMean("limt", ["limit", "json"], "--"), " (did you mean --limit?)");
    assert.equal(didYouMean("bogus", ["limit", "json"], "--"), "");
  });
});
