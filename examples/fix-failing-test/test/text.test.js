import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { capitalize, slugify, truncate } from "../src/text.js";

describe("truncate", () => {
  it("keeps a text that fits", () => {
    assert.equal(truncate("agentd", 10), "agentd");
    assert.equal(truncate("agentd", 6), "agentd");
  });

  it("never returns more than max characters, the ellipsis included", () => {
    assert.equal(truncate("hello world", 8), "hello w…");
    assert.equal(truncate("hello world", 8).length, 8);
  });
});

describe("slugify", () => {
  it("joins words with dashes", () => {
    assert.equal(slugify("Hello, World!"), "hello-world");
  });

  it("drops accents", () => {
    assert.equal(slugify("Crème brûlée"), "creme-brulee");
  });
});

describe("capitalize", () => {
  it("upper-cases the first character", () => {
    assert.equal(capitalize("agent"), "Agent");
    assert.equal(capitalize(""), "");
  });
});
