import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { callEffect, commandMayWrite } from "./call-effects.ts";

describe("callEffect: what a recorded call did to the workspace", () => {
  it("reads are nothing, patches re-apply, setup is re-run, other commands cannot be reproduced", () => {
    assert.equal(callEffect("repo.read", { path: "a" }), "none");
    assert.equal(callEffect("repo.search", { query: "a" }), "none");
    assert.equal(callEffect("repo.patch", { path: "a", edits: [] }), "patch");
    assert.equal(callEffect("setup.run", {}), "rerun");
    assert.equal(callEffect("test.run", {}), "unreproducible");
    assert.equal(callEffect("lint.run", {}), "unreproducible");
    assert.equal(callEffect("made.up", {}), "unreproducible");
  });

  it("a command line of programs that never write is nothing; any write, unknown or unseen program is a write", () => {
    const none = [
      "cat a.txt",
      "ls -la && grep -r foo .",
      "echo hi 2>&1 >/dev/null",
      "timeout 5 cat x",
    ];
    for (const command of none) assert.equal(commandMayWrite({ command }), false, command);
    const writes = [
      "echo made > made.txt",
      "echo a >> log",
      "touch x",
      "mkdir d",
      "sed -i s/a/b/ f",
      "python3 gen.py",
      "cat $(echo f)",
      "timeout 5 rm -rf x",
      "find . -delete",
      "cat a | tee b",
      "npm install",
    ];
    for (const command of writes) assert.equal(commandMayWrite({ command }), true, command);
  });

  it("argv inputs: a never-writing program alone is nothing; wrappers and others are writes", () => {
    assert.equal(commandMayWrite({ argv: ["cat", "a"] }), false);
    assert.equal(commandMayWrite({ argv: ["/bin/ls"] }), false);
    assert.equal(commandMayWrite({ argv: ["env", "rm", "x"] }), true);
    assert.equal(commandMayWrite({ argv: ["python3", "-c", "open('x','w')"] }), true);
  });

  it("a never-writing name run by a path outside the system's directories is a write (the model's own script)", () => {
    for (const command of [
      "./cat f",
      "bin/ls",
      "/workspace/ls",
      "sub/dir/grep x",
      "rg --pre ./g.sh x",
    ])
      assert.equal(commandMayWrite({ command }), true, command);
    for (const argv of [
      ["./cat", "f"],
      ["/workspace/bin/ls"],
      ["rg", "--pre", "./g.sh", "x"],
      ["rg", "--pre=./g.sh", "x"],
    ])
      assert.equal(commandMayWrite({ argv }), true, JSON.stringify(argv));
    for (const command of ["/bin/cat f", "/usr/bin/ls -la", "rg foo ."])
      assert.equal(commandMayWrite({ command }), false, command);
  });

  it("hostile inputs count as writes (never as read-only)", () => {
    for (const input of [
      undefined,
      null,
      42,
      "echo",
      [],
      {},
      { command: 5 },
      { argv: [1, 2] },
      { argv: [] },
    ])
      assert.equal(commandMayWrite(input), true, JSON.stringify(input));
    assert.equal(callEffect("process.run", "cat a"), "unreproducible");
  });
});
