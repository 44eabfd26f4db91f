/**
 * The workspace patch of a real run: a Node and a Python repository uploaded into a real
 * sandbox (Docker, the base image), real commands in it (unittest making __pycache__,
 * node --test, random binaries, symlinks out of the tree, chmod, rm, a secret written to a
 * file), the export diffed, and the patch applied with the real git onto the upload: the
 * result is the container's workspace minus what is ignored or left out.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { after, before, describe, it } from "node:test";
import { ulid } from "ulid";
import { createRedactor } from "../kernel/redaction.ts";
import { sandboxImage, TEST_LIMITS, testSandbox } from "../testing/docker.ts";
import type { Sandbox, SandboxHandle } from "./port.ts";
import {
  packWorkspace,
  readWorkspaceArchive,
  SANDBOX_EXPORT_LIMITS,
  type WorkspaceFile,
} from "./workspace-archive.ts";
import { diffWorkspace } from "./workspace-diff.ts";
import { expectedTree, gitApply, type TreeEntry, treeOf } from "./workspace-diff-fixtures.ts";

const SECRET = "sk-live-0123456789abcdefXYZ";
const redactor = createRedactor({ secrets: () => [SECRET] });
const redact = (s: string) => redactor.text(s);

const file = (path: string, data: string | Buffer, mode = 0o644): WorkspaceFile => ({
  path,
  type: "file",
  mode,
  data: Buffer.from(data),
});

const UPLOAD: WorkspaceFile[] = [
  file(
    "package.json",
    `${JSON.stringify({ name: "demo", type: "module", scripts: { test: "node --test" } }, null, 2)}\n`,
  ),
  file("index.js", "export const add = (a, b) => a + b;\n"),
  file(
    "test/add.test.js",
    'import assert from "node:assert/strict";\nimport { test } from "node:test";\nimport { add } from "../index.js";\n\ntest("add", () => assert.equal(add(1, 2), 3));\n',
  ),
  file("run.sh", "#!/bin/sh\nnode --test\n"),
  file("obsolete.txt", "remove me\n"),
  file("logo.bin", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 1, 2, 3])),
  file("py/.gitignore", "__pycache__/\n*.egg-info/\n"),
  file("py/calc.py", "def mul(a, b):\n    return a * b\n"),
  file(
    "py/test_calc.py",
    "import unittest\nfrom calc import mul\n\n\nclass T(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\nif __name__ == '__main__':\n    unittest.main()\n",
  ),
];

/** The run's commands, as the sandbox user in /workspace. */
const SCRIPT = `
set -e
cd py && python3 -m unittest -q 2>&1 && cd ..
printf 'def sub(a, b):\\n    return a - b\\n' >> py/calc.py
printf 'export const sub = (a, b) => a - b;\\n' >> index.js
printf 'import assert from "node:assert/strict";\\nimport { test } from "node:test";\\nimport { sub } from "../index.js";\\n\\ntest("sub", () => assert.equal(sub(3, 2), 1));\\n' > test/sub.test.js
node --test 2>&1 | tail -n 3
head -c 300 /dev/urandom > data.bin
head -c 40 /dev/urandom >> logo.bin
ln -s / r
ln -s /etc/passwd pw
ln -s index.js entry.js
ln -s ../index.js test/up.js
ln -s .git g1
ln -s .GIT g2
ln -s ./.git g3
ln -s py/../.Git/hooks g4
ln -s ../.git/config test/g5
chmod +x run.sh
rm obsolete.txt
printf 'API_TOKEN=%s\\nMODE=dev\\n' "$AGENT_SECRET" > .env.local
printf 'x\\0%s' "$AGENT_SECRET" > secret.bin
printf 'odd\\n' > 'sp ace "q" ü.txt'
mkdir -p py/pkg.egg-info && echo meta > py/pkg.egg-info/PKG-INFO
test -d py/__pycache__
`;

let sandbox: Sandbox;
let cleanup: () => Promise<void>;
let box: SandboxHandle;

/** The sandbox's export as a byte stream, whether the handle answers a Buffer or a stream. */
function openExport(): AsyncIterable<Uint8Array> {
  const out = box.exportWorkspace() as unknown as Promise<Uint8Array> | AsyncIterable<Uint8Array>;
  return (async function* () {
    if (Symbol.asyncIterator in out) yield* out;
    else yield await out;
  })();
}

async function containerTree(): Promise<Map<string, TreeEntry>> {
  const parts: Uint8Array[] = [];
  for await (const c of openExport()) parts.push(c);
  return treeOf(await readWorkspaceArchive(Buffer.concat(parts), SANDBOX_EXPORT_LIMITS));
}

/** True when the symlink at `path` (target `target`) leads out of the tree, lexically. */
function leadsOut(path: string, target: string): boolean {
  if (target.startsWith("/")) return true;
  const resolved = posix.normalize(posix.join(posix.dirname(path), target));
  return resolved === ".." || resolved.startsWith("../");
}

before(async () => {
  ({ sandbox, cleanup } = await testSandbox());
  box = await sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage("base"),
    limits: { ...TEST_LIMITS, memoryBytes: 512 * 1024 * 1024, pids: 256 },
    network: "none",
    workspaceTar: await packWorkspace(UPLOAD),
  });
});
after(async () => {
  await cleanup();
});

describe("workspace patch of a real sandbox", () => {
  it("applies with git apply onto the upload and gives the workspace minus ignored and left-out paths", async () => {
    const run = await box.exec({
      argv: ["sh", "-c", SCRIPT],
      env: { AGENT_SECRET: SECRET },
      timeoutMs: 120_000,
      maxOutputBytes: 64 * 1024,
    });
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    const r = await diffWorkspace({
      base: UPLOAD,
      openExport,
      maxPatchBytes: 64 * 1024 * 1024,
      redact,
    });
    assert.ok(!r.patch.includes(SECRET), "no secret in the patch");
    assert.equal(redact(r.patch), r.patch);
    assert.deepEqual(r.added.sort(), [
      ".env.local",
      "data.bin",
      "entry.js",
      'sp ace "q" ü.txt',
      "test/sub.test.js",
      "test/up.js",
    ]);
    assert.deepEqual(r.modified, ["index.js", "logo.bin", "py/calc.py", "run.sh"]);
    assert.deepEqual(r.deleted, ["obsolete.txt"]);
    assert.deepEqual(r.binary.sort(), ["data.bin", "logo.bin"]);
    assert.deepEqual(r.redactedFiles, [".env.local"]);
    const intoGit = "a symlink that points into .git";
    assert.deepEqual(Object.fromEntries(r.omitted.map((o) => [o.path, o.reason])), {
      g1: intoGit,
      g2: intoGit,
      g3: intoGit,
      g4: intoGit,
      "test/g5": intoGit,
      pw: "a symlink that points to an absolute path",
      r: "a symlink that points to an absolute path",
      "secret.bin": "a binary file holding a secret value",
    });
    assert.ok(r.ignored >= 2, `__pycache__ and the egg-info are ignored (${r.ignored})`);
    assert.doesNotMatch(r.patch, /__pycache__|\.pyc|egg-info/);

    const base = treeOf(UPLOAD);
    const inContainer = await containerTree();
    const applied = gitApply(base, r.patch);
    assert.deepEqual(applied, expectedTree(base, inContainer, r, redact));
    assert.equal(applied.get(".env.local")?.data.toString(), "API_TOKEN=[REDACTED]\nMODE=dev\n");
    assert.deepEqual(applied.get("data.bin")?.data, inContainer.get("data.bin")?.data);
    assert.deepEqual(applied.get("logo.bin")?.data, inContainer.get("logo.bin")?.data);
    assert.equal(applied.get("run.sh")?.exec, true);
    for (const [p, e] of applied) {
      if (e.kind === "symlink") assert.ok(!leadsOut(p, e.data.toString()), `${p} leads out`);
    }
    assert.equal(applied.get("entry.js")?.kind, "symlink");
    assert.doesNotMatch(r.patch, /^\+\.?\/?[^\n]*\.git/im, "no link target into .git");
    for (const p of ["g1", "g2", "g3", "g4", "test/g5"]) assert.equal(applied.get(p), undefined, p);
    assert.ok(![...applied.keys()].some((p) => p.includes("__pycache__")));
  });
});
