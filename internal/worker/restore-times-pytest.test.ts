/**
 * pytest across a real pause (see restore-times.test.ts for the harness). pytest rewrites
 * the asserts of each test module and caches the result in `__pycache__` keyed by the
 * source's mtime and size, as Python does for bytecode: restored with mtime 0, a test file
 * edited (same size) before the pause would run as it was before the edit. Needs the Python
 * sandbox image (agentd-sandbox-python:latest, with pytest; `make images`); a missing image
 * fails, never skips.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  edit,
  file,
  type PauseRestore,
  requireImage,
  sh,
  startPauseRestore,
  stdoutOf,
} from "../testing/pause-restore.ts";

const PYTHON_IMAGE = "agentd-sandbox-python:latest";

let harness: PauseRestore;
before(async () => {
  await requireImage(PYTHON_IMAGE);
  harness = await startPauseRestore();
});
after(async () => {
  await harness?.close();
});

describe("a pytest workspace restored after a pause (Python image)", () => {
  it("pytest runs the edited test, not its cached rewrite", async () => {
    const results = await harness.run({
      image: PYTHON_IMAGE,
      files: [
        file("calc.py", "def add(a, b):\n    return a + b\n"),
        file(
          "test_calc.py",
          "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
        ),
      ],
      before: [
        sh("first", "python3 -m pytest -q -p no:cacheprovider && ls __pycache__"),
        // Same size: 4 → 5 makes the test fail, which only a fresh rewrite can show.
        edit("edit-test", "test_calc.py", "== 4", "== 5"),
      ],
      after: [sh("again", 'python3 -m pytest -q -p no:cacheprovider; echo "exit=$?"')],
    });
    const first = stdoutOf(results, "first");
    assert.match(first, /1 passed/);
    assert.match(first, /test_calc\.cpython-\d+-pytest-[\d.]+\.pyc/, "pytest cached its rewrite");
    assert.ok(results.get("edit-test")?.ok);
    const again = stdoutOf(results, "again");
    assert.match(again, /assert 4 == 5/, "the edited assert ran");
    assert.match(again, /1 failed/);
    assert.match(again, /exit=1/);
  });
});
