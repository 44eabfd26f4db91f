/**
 * The runner trees' pure parts: the scan's parsing (fail closed on anything odd), the
 * comparison with a baseline, which paths are in a tree, which calls run a runner, and
 * whether the log lets a new drive take the trees as they are. The scan itself and the
 * kernel's use of it run against real containers in runner-path.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  type Event,
  EventSchema,
  ToolCallSchema,
  ToolResultSchema,
  ToolStartedSchema,
} from "../gen/agentd/v1/events_pb.js";
import { runsRunner } from "./runner-files.ts";
import { inRunnerTree, parseTreeScan, treeChanges, treesAsLeft } from "./runner-trees.ts";

const rec = (path: string, f = "f 10 7 1.5") => `${f} ${path}\0`;

describe("parseTreeScan", () => {
  it("reads NUL-separated records, workspace paths made relative, any byte in a name", () => {
    const scan = parseTreeScan(
      rec("/workspace/node_modules/.bin/eslint", "l 22 9 3.25") +
        rec("/workspace/a\nb/conftest.py") +
        rec("/tmp/.cache/go/x") +
        "END\0",
    );
    assert.deepEqual(
      [...(scan ?? new Map())],
      [
        ["node_modules/.bin/eslint", "l 22 9 3.25"],
        ["a\nb/conftest.py", "f 10 7 1.5"],
        ["/tmp/.cache/go/x", "f 10 7 1.5"],
      ],
    );
  });
  it("is unsure without END, with a malformed record, or with a path twice", () => {
    assert.equal(parseTreeScan(rec("/workspace/x.pth")), undefined, "cut short");
    assert.equal(parseTreeScan(`garbage\0END\0`), undefined);
    assert.equal(parseTreeScan(`f 1 2 /workspace/x\0END\0`), undefined, "a field missing");
    assert.equal(
      parseTreeScan(`${rec("/workspace/x.pth") + rec("/workspace/x.pth")}END\0`),
      undefined,
    );
    assert.deepEqual(parseTreeScan("END\0"), new Map());
  });
});

describe("treeChanges", () => {
  const base = new Map([
    ["node_modules/a", "f 1 1 1.0"],
    ["node_modules/b", "f 1 2 1.0"],
  ]);
  it("names new, changed and gone entries", () => {
    const now = new Map([
      ["node_modules/a", "f 1 1 1.0"],
      ["node_modules/b", "f 1 2 2.0"],
      ["node_modules/c", "f 1 3 1.0"],
    ]);
    assert.deepEqual(treeChanges(base, now), ["node_modules/b", "node_modules/c"]);
    assert.deepEqual(treeChanges(base, new Map([["node_modules/a", "f 1 1 1.0"]])), [
      "node_modules/b",
    ]);
    assert.deepEqual(treeChanges(base, new Map(base)), []);
  });
  it("counts every entry without a baseline, and a failed scan as written", () => {
    assert.deepEqual(treeChanges(undefined, base), ["node_modules/a", "node_modules/b"]);
    assert.equal(treeChanges(base, undefined).length, 1);
  });
});

describe("inRunnerTree and runsRunner", () => {
  it("knows the trees and the files runners load from any directory", () => {
    for (const p of [
      "node_modules/.bin/eslint",
      "pkg/node_modules/x/index.js",
      ".venv/bin/pytest",
      "venv/lib/python3.11/site-packages/sitecustomize.py",
      "deep/tests/unit/conftest.py",
      "crates/x/build.rs",
      "x.pth",
    ])
      assert.equal(inRunnerTree(p), true, p);
    for (const p of ["src/a.ts", "node_modules.txt", "tests/test_a.py", "my_venv/x"])
      assert.equal(inRunnerTree(p), false, p);
  });
  it("a runner tool, or a command that runs a runner file, runs a runner", () => {
    assert.equal(runsRunner("lint.run", []), true);
    assert.equal(runsRunner("process.run", ["package.json"]), true);
    assert.equal(runsRunner("process.run", ["sub/Makefile"]), true);
    assert.equal(runsRunner("process.run", ["s.sh"]), false);
    assert.equal(runsRunner("repo.read", []), false);
  });
});

describe("treesAsLeft", () => {
  const call = (id: string, tool: string, input: object = {}): Event[] => [
    create(EventSchema, {
      payload: {
        case: "toolCall",
        value: create(ToolCallSchema, { callId: id, tool, inputJson: JSON.stringify(input) }),
      },
    }),
    create(EventSchema, {
      payload: { case: "toolStarted", value: create(ToolStartedSchema, { callId: id }) },
    }),
    create(EventSchema, {
      payload: { case: "toolResult", value: create(ToolResultSchema, { callId: id, ok: true }) },
    }),
  ];
  it("holds for the upload, reads, patches outside the trees and after a runner ended", () => {
    assert.equal(treesAsLeft([]), true);
    assert.equal(
      treesAsLeft([
        ...call("a", "repo.read", { path: "x" }),
        ...call("b", "repo.patch", { path: "src/a.py" }),
      ]),
      true,
    );
    assert.equal(
      treesAsLeft([...call("a", "process.run", { command: "ls" }), ...call("b", "test.run")]),
      true,
    );
  });
  it("fails after an exec, a patch into a tree, an unknown tool, or a start without its call", () => {
    assert.equal(treesAsLeft(call("a", "process.run", { command: "ls" })), false);
    assert.equal(treesAsLeft(call("a", "repo.patch", { path: "node_modules/.bin/x" })), false);
    assert.equal(treesAsLeft(call("a", "repo.patch", { path: "t/conftest.py" })), false);
    assert.equal(treesAsLeft(call("a", "repo.patch", {})), false, "no path: unsure");
    assert.equal(treesAsLeft(call("a", "future.tool")), false);
    assert.equal(
      treesAsLeft([...call("b", "setup.run"), ...call("a", "process.run", { command: "x" })]),
      false,
    );
    const orphan = create(EventSchema, {
      payload: { case: "toolStarted", value: create(ToolStartedSchema, { callId: "z" }) },
    });
    assert.equal(treesAsLeft([orphan]), false);
  });
});
