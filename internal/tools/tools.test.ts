/**
 * The capability tools against a real container of the base image: jail (hostile paths,
 * symlink escapes), atomic patches, search, commands. Nothing here fakes the sandbox.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { isAgentdError } from "../errors.ts";
import type { SandboxHandle } from "../sandbox/port.ts";
import { packWorkspace, type WorkspaceFile } from "../sandbox/workspace-archive.ts";
import { countingExecs, sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import { invokeTool, TOOLS } from "./registry.ts";
import { planPatch } from "./repo-patch.ts";
import {
  DEFAULT_DENY_PATTERNS,
  DEFAULT_TOOL_LIMITS,
  type ToolContext,
  toolJsonSchema,
} from "./tool.ts";

let box: SandboxHandle;
let ctx: ToolContext;
let cleanup: () => Promise<void>;

const file = (path: string, text: string, mode = 0o644): WorkspaceFile => ({
  path,
  type: "file",
  mode,
  data: Buffer.from(text),
});
const calc =
  "export function add(a, b) {\n  return a - b;\n}\n\nexport function mul(a, b) {\n  return a * b;\n}\n";

before(async () => {
  const t = await testSandbox();
  cleanup = t.cleanup;
  const files = [
    file("README.md", "# demo\nline 2\nline 3\n"),
    file("src/calc.js", calc),
    file("src/big.txt", "x".repeat(300 * 1024)),
    file("bin.dat", "a\0b\0c"),
    file(".env", "SECRET=1\n"),
    file(".git/config", "[core]\n"),
    file("run.sh", "#!/bin/sh\necho run\n", 0o755),
  ];
  box = await t.sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("base"),
    limits: { ...TEST_LIMITS, memoryBytes: 512 * 1024 * 1024, pids: 128 },
    network: "none",
    workspaceTar: await packWorkspace(files),
  });
  ctx = {
    sandbox: box,
    limits: {
      ...DEFAULT_TOOL_LIMITS,
      maxFileReadBytes: 256 * 1024,
      maxOutputBytes: 64 * 1024,
      maxSearchMatches: 5,
    },
    denyPatterns: DEFAULT_DENY_PATTERNS,
    commands: {
      test: { command: "node --test {name}", source: "policy tools.test" },
      lint: { command: "sh -c 'echo lint-ok; exit 1'", source: "policy tools.lint" },
    },
  };
  // A symlink trap planted by an "earlier process.run".
  await invokeTool(ctx, "process.run", {
    command:
      "ln -s /etc etc-link && ln -s /etc/passwd passwd-link && ln -s .git/config git-link && ln -s /tmp tmp-link && mkdir -p d && ln -s ../.. d/up",
  });
});
after(async () => cleanup());

const err = async (p: Promise<unknown>, code: string, re?: RegExp) =>
  assert.rejects(
    p,
    (e) => isAgentdError(e) && e.code === code && (re === undefined || re.test(e.message)),
  );

describe("tool declarations", () => {
  it("every tool has a category, a description and a JSON schema for the model", () => {
    assert.deepEqual(
      TOOLS.map((t) => t.name),
      [
        "repo.read",
        "repo.search",
        "repo.patch",
        "process.run",
        "test.run",
        "lint.run",
        "setup.run",
      ],
    );
    for (const t of TOOLS) {
      const s = toolJsonSchema(t);
      assert.equal(s.type, "object", t.name);
      assert.ok(t.description.length > 20);
      assert.ok(["read", "write", "exec"].includes(t.category));
    }
    assert.deepEqual(toolJsonSchema(TOOLS[0] as (typeof TOOLS)[number]).required as string[], [
      "path",
    ]);
  });

  it("rejects unknown tools and invalid input naming the field", async () => {
    await err(invokeTool(ctx, "shell.exec", {}), "EVALIDATION", /unknown tool/);
    await err(invokeTool(ctx, "repo.read", { path: 42 }), "EVALIDATION", /path/);
    await err(invokeTool(ctx, "repo.read", { path: "a", extra: 1 }), "EVALIDATION");
    await err(
      invokeTool(ctx, "repo.read", { path: "a", range: { start: 5, end: 2 } }),
      "EVALIDATION",
      /range\.end/,
    );
    await err(
      invokeTool(ctx, "repo.patch", { path: "a" }),
      "EVALIDATION",
      /exactly one of unifiedDiff or edits/,
    );
  });
});

describe("jail", () => {
  const hostile: [string, RegExp][] = [
    ["/etc/passwd", /absolute/],
    ["../etc/passwd", /'\.\.'/],
    ["src/../../etc/passwd", /'\.\.'/],
    ["a\0b", /NUL/],
    [".git/config", /deny pattern/],
    [".git", /deny pattern/],
    ["sub/.git/config", /deny pattern/],
    ["vendor/lib/.git", /deny pattern/],
    ["etc-link/passwd", /outside \/workspace/],
    ["passwd-link", /outside \/workspace/],
    ["git-link", /deny pattern/],
    ["d/up/etc/passwd", /outside \/workspace/],
  ];
  for (const [path, re] of hostile) {
    it(`repo.read ${JSON.stringify(path)} answers EPERMISSION`, async () => {
      await err(invokeTool(ctx, "repo.read", { path }), "EPERMISSION", re);
    });
  }

  it("repo.patch cannot write through a symlink out of the workspace", async () => {
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "tmp-link/evil.txt",
        edits: [{ oldText: "", newText: "x" }],
      }),
      "EPERMISSION",
      /outside/,
    );
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "etc-link/passwd",
        edits: [{ oldText: "root", newText: "x" }],
      }),
      "EPERMISSION",
    );
    const r = (await invokeTool(ctx, "process.run", {
      command: "ls /tmp/evil.txt 2>&1 || true",
    })) as { stdout: string };
    assert.match(r.stdout, /No such file/);
  });

  it("device files and directories are not readable as files", async () => {
    await err(invokeTool(ctx, "repo.read", { path: "src" }), "EPERMISSION", /not a regular file/);
    await invokeTool(ctx, "process.run", { command: "ln -sf /dev/zero zero" });
    await err(invokeTool(ctx, "repo.read", { path: "zero" }), "EPERMISSION", /outside/);
  });

  it("process.run refuses a cwd that leaves the workspace", async () => {
    await err(invokeTool(ctx, "process.run", { command: "pwd", cwd: "../" }), "EPERMISSION");
    const r = (await invokeTool(ctx, "process.run", { command: "pwd", cwd: "tmp-link" })) as {
      exitCode: number;
      stderr: string;
    };
    assert.equal(r.exitCode, 126);
    assert.match(r.stderr, /leaves the workspace/);
  });
});

describe("repo.read", () => {
  it("reads whole files and line ranges", async () => {
    const all = (await invokeTool(ctx, "repo.read", { path: "README.md" })) as {
      content: string;
      endLine: number;
    };
    assert.equal(all.content, "# demo\nline 2\nline 3\n");
    assert.equal(all.endLine, 3);
    const some = (await invokeTool(ctx, "repo.read", {
      path: "./src/calc.js",
      range: { start: 2, end: 3 },
    })) as Record<string, unknown>;
    assert.deepEqual(some, {
      path: "src/calc.js",
      content: "  return a - b;\n}\n",
      startLine: 2,
      endLine: 3,
      truncated: false,
    });
  });

  it("caps large files and refuses binary ones", async () => {
    const big = (await invokeTool(ctx, "repo.read", { path: "src/big.txt" })) as {
      content: string;
      truncated: boolean;
    };
    assert.equal(big.truncated, true);
    assert.equal(big.content.length, 256 * 1024);
    await err(invokeTool(ctx, "repo.read", { path: "bin.dat" }), "EVALIDATION", /binary/);
    await err(invokeTool(ctx, "repo.read", { path: "missing.txt" }), "ENOTFOUND");
  });
});

describe("repo.search", () => {
  it("finds matches with paths and line numbers, never in denied paths, capped", async () => {
    const r = (await invokeTool(ctx, "repo.search", { query: "return a" })) as {
      matches: { path: string; line: number }[];
    };
    assert.deepEqual(r.matches.map((m) => `${m.path}:${m.line}`).sort(), [
      "src/calc.js:2",
      "src/calc.js:6",
    ]);
    const core = (await invokeTool(ctx, "repo.search", { query: "core" })) as {
      matches: unknown[];
    };
    assert.deepEqual(core.matches, [], ".git is never searched");
    const capped = (await invokeTool(ctx, "repo.search", {
      query: "line|demo|return|export|echo",
    })) as { matches: unknown[]; truncated: boolean };
    assert.equal(capped.matches.length, 5);
    assert.equal(capped.truncated, true);
    const globbed = (await invokeTool(ctx, "repo.search", { query: "e", globs: ["*.md"] })) as {
      matches: { path: string }[];
    };
    assert.ok(globbed.matches.every((m) => m.path === "README.md"));
    await err(invokeTool(ctx, "repo.search", { query: "(unclosed" }), "EVALIDATION", /query/);
  });
});

describe("repo.patch", () => {
  it("applies a unified diff and reports what changed", async () => {
    const r = (await invokeTool(ctx, "repo.patch", {
      path: "src/calc.js",
      unifiedDiff:
        "--- a/src/calc.js\n+++ b/src/calc.js\n@@ -1,3 +1,3 @@\n export function add(a, b) {\n-  return a - b;\n+  return a + b;\n }\n",
    })) as Record<string, unknown>;
    assert.equal(r.changed, true);
    assert.equal(r.linesAdded, 1);
    assert.equal(r.linesRemoved, 1);
    assert.match(String(r.diff), /^diff --git a\/src\/calc.js b\/src\/calc.js/);
    const now = (await invokeTool(ctx, "repo.read", { path: "src/calc.js" })) as {
      content: string;
    };
    assert.match(now.content, /return a \+ b;/);
  });

  it("writes a previewed plan without reading again, and never over a file changed since", async () => {
    await invokeTool(ctx, "repo.patch", {
      path: "cas.txt",
      edits: [{ oldText: "", newText: "v1\n" }],
    });
    const input = { path: "cas.txt", edits: [{ oldText: "v1", newText: "v2" }] };
    // The approval preview's dry run, reused by the call: one exec (the write), not two.
    const plan = await planPatch(ctx, input);
    const counting = countingExecs(box);
    await invokeTool({ ...ctx, prepared: plan, sandbox: counting.handle }, "repo.patch", input);
    assert.equal(counting.execs(), 1);
    const read = async () =>
      ((await invokeTool(ctx, "repo.read", { path: "cas.txt" })) as { content: string }).content;
    assert.equal(await read(), "v2\n");

    // Planned against v2; something else writes the file before the call runs: refused.
    const stale = await planPatch(ctx, {
      path: "cas.txt",
      edits: [{ oldText: "v2", newText: "v3" }],
    });
    await invokeTool(ctx, "process.run", { command: "printf 'changed\\n' > cas.txt" });
    await err(
      invokeTool({ ...ctx, prepared: stale }, "repo.patch", {
        path: "cas.txt",
        edits: [{ oldText: "v2", newText: "v3" }],
      }),
      "ECONFLICT",
      /changed after it was read/,
    );
    assert.equal(await read(), "changed\n");

    // A plan that creates a file is refused when the file appeared meanwhile.
    const create = { path: "new-cas.txt", edits: [{ oldText: "", newText: "mine\n" }] };
    const creating = await planPatch(ctx, create);
    await invokeTool(ctx, "process.run", { command: "echo theirs > new-cas.txt" });
    await err(invokeTool({ ...ctx, prepared: creating }, "repo.patch", create), "ECONFLICT");
    assert.equal(
      ((await invokeTool(ctx, "repo.read", { path: "new-cas.txt" })) as { content: string })
        .content,
      "theirs\n",
    );
  });

  it("is atomic: when one hunk fails, it names it and nothing changes", async () => {
    const before = (
      (await invokeTool(ctx, "repo.read", { path: "src/calc.js" })) as { content: string }
    ).content;
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "src/calc.js",
        unifiedDiff:
          "--- a/src/calc.js\n+++ b/src/calc.js\n@@ -1,3 +1,3 @@\n export function add(a, b) {\n-  return a + b;\n+  return (a + b);\n }\n@@ -5,3 +5,3 @@\n export function mul(a, b) {\n-  return a / b;\n+  return a * b * 1;\n }\n",
      }),
      "ECONFLICT",
      /hunk 2 of 2 \(@@ -5,3 \+5,3 @@\)/,
    );
    const afterFail = (
      (await invokeTool(ctx, "repo.read", { path: "src/calc.js" })) as { content: string }
    ).content;
    assert.equal(afterFail, before);
  });

  it("applies edits, refuses ambiguous or missing oldText without writing", async () => {
    await invokeTool(ctx, "repo.patch", {
      path: "README.md",
      edits: [
        { oldText: "line 2", newText: "second line" },
        { oldText: "# demo", newText: "# Demo" },
      ],
    });
    const r = (await invokeTool(ctx, "repo.read", { path: "README.md" })) as { content: string };
    assert.equal(r.content, "# Demo\nsecond line\nline 3\n");
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "README.md",
        edits: [
          { oldText: "line 3", newText: "x" },
          { oldText: "nope", newText: "y" },
        ],
      }),
      "ECONFLICT",
      /edit 2 of 2: oldText not found/,
    );
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "src/calc.js",
        edits: [{ oldText: "export function", newText: "x" }],
      }),
      "ECONFLICT",
      /more than once/,
    );
    assert.equal(
      ((await invokeTool(ctx, "repo.read", { path: "README.md" })) as { content: string }).content,
      "# Demo\nsecond line\nline 3\n",
    );
  });

  it("creates and deletes files, keeps the mode of an edited file", async () => {
    await invokeTool(ctx, "repo.patch", {
      path: "new/dir/f.txt",
      unifiedDiff: "--- /dev/null\n+++ b/new/dir/f.txt\n@@ -0,0 +1,1 @@\n+fresh\n",
    });
    assert.equal(
      ((await invokeTool(ctx, "repo.read", { path: "new/dir/f.txt" })) as { content: string })
        .content,
      "fresh\n",
    );
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "new/dir/f.txt",
        unifiedDiff: "--- /dev/null\n+++ b/new/dir/f.txt\n@@ -0,0 +1,1 @@\n+again\n",
      }),
      "ECONFLICT",
      /exists/,
    );
    await invokeTool(ctx, "repo.patch", {
      path: "new/dir/f.txt",
      unifiedDiff: "--- a/new/dir/f.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-fresh\n",
    });
    await err(invokeTool(ctx, "repo.read", { path: "new/dir/f.txt" }), "ENOTFOUND");
    await invokeTool(ctx, "repo.patch", {
      path: "run.sh",
      edits: [{ oldText: "echo run", newText: "echo ran" }],
    });
    const r = (await invokeTool(ctx, "process.run", {
      command: "./run.sh; stat -c %a run.sh",
    })) as { stdout: string };
    assert.equal(r.stdout, "ran\n755\n");
  });

  it("refuses binary patches, patches of other files and a 500-file diff", async () => {
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "bin.dat",
        unifiedDiff: "diff --git a/bin.dat b/bin.dat\nGIT binary patch\nliteral 3\nKcmZ>\n",
      }),
      "EVALIDATION",
      /binary/,
    );
    for (const [path, target] of [
      ["hooks", ".git/hooks"],
      ["g", ".GIT"],
      ["h", "./.Git/config"],
    ])
      await err(
        invokeTool(ctx, "repo.patch", {
          path,
          unifiedDiff: `diff --git a/${path} b/${path}\nnew file mode 120000\n--- /dev/null\n+++ b/${path}\n@@ -0,0 +1 @@\n+${target}\n\\ No newline at end of file\n`,
        }),
        "EVALIDATION",
        /symlinks are not supported/,
      );
    await err(
      invokeTool(ctx, "repo.patch", {
        path: "README.md",
        unifiedDiff: "--- a/other.md\n+++ b/other.md\n@@ -1,1 +1,1 @@\n-a\n+b\n",
      }),
      "EVALIDATION",
      /names "a\/other.md"/,
    );
    const many = Array.from(
      { length: 500 },
      (_, i) => `--- a/f${i}\n+++ b/f${i}\n@@ -1,1 +1,1 @@\n-a\n+b\n`,
    ).join("");
    await err(
      invokeTool(ctx, "repo.patch", { path: "f0", unifiedDiff: many }),
      "EVALIDATION",
      /exactly one file/,
    );
    await err(
      invokeTool(ctx, "repo.patch", { path: "nope.txt", edits: [{ oldText: "a", newText: "b" }] }),
      "ENOTFOUND",
    );
  });
});

describe("commands", () => {
  it("process.run returns exit code and output; non-zero is a result, not an error", async () => {
    const r = (await invokeTool(ctx, "process.run", {
      command: "echo out; echo err >&2; exit 3",
    })) as Record<string, unknown>;
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    // sleep 32 in front: the call returning with timedOut is the 300 ms timeout firing.
    const slow = (await invokeTool(ctx, "process.run", {
      command: "sleep 30 & sleep 31 & sleep 32",
      timeoutMs: 300,
    })) as Record<string, unknown>;
    assert.equal(slow.timedOut, true);
    const ps = (await invokeTool(ctx, "process.run", {
      command: "ps -eo args | grep -c '^sleep 3[012]' || true",
    })) as { stdout: string };
    assert.equal(ps.stdout.trim(), "0", "the whole process group is gone");
    const bg = (await invokeTool(ctx, "process.run", { command: "sleep 40 & echo started" })) as {
      stdout: string;
    };
    assert.equal(bg.stdout, "started\n");
    const ps2 = (await invokeTool(ctx, "process.run", {
      command: "ps -eo args | grep -c '^sleep 40' || true",
    })) as { stdout: string };
    assert.equal(ps2.stdout.trim(), "0", "nothing a call started outlives it");
  });

  it("test.run quotes the test name; lint.run runs the configured command", async () => {
    await invokeTool(ctx, "repo.patch", {
      path: "calc.test.js",
      edits: [
        {
          oldText: "",
          newText:
            "const t = require('node:test');\nt.test('adds', () => { if (1 + 1 !== 2) throw new Error('x'); });\n",
        },
      ],
    });
    const ok = (await invokeTool(ctx, "test.run", { name: "calc.test.js" })) as {
      exitCode: number;
      stdout: string;
      command: string;
      source: string;
    };
    assert.equal(ok.exitCode, 0, ok.stdout);
    assert.equal(ok.command, "node --test 'calc.test.js'");
    assert.equal(ok.source, "policy tools.test");
    const evil = (await invokeTool(ctx, "test.run", { name: "x'; touch pwned; echo '" })) as {
      command: string;
    };
    assert.equal(evil.command, `node --test 'x'\\''; touch pwned; echo '\\'''`);
    await err(invokeTool(ctx, "repo.read", { path: "pwned" }), "ENOTFOUND");
    const lint = (await invokeTool(ctx, "lint.run", {})) as { exitCode: number; stdout: string };
    assert.deepEqual([lint.exitCode, lint.stdout], [1, "lint-ok\n"]);
    await err(
      invokeTool({ ...ctx, commands: {} }, "lint.run", {}),
      "EVALIDATION",
      /no lint command/,
    );
  });
});
