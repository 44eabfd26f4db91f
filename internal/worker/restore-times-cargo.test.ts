/**
 * cargo across a real pause (see restore-times.test.ts for the harness). cargo decides a
 * local crate is fresh when none of its sources is newer than its fingerprint in target/:
 * restored with mtime 0 everywhere, a same-size edit made before the pause would look as old
 * as the build and `cargo run` would run the old binary. target/ is in the workspace, so it
 * is in the snapshot. Needs the Rust sandbox image (agentd-sandbox-rust:latest; `make
 * images`); a missing image fails, never skips. No dependencies: nothing is fetched.
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

const RUST_IMAGE = "agentd-sandbox-rust:latest";
/** Offline: there is no network, and the crate has no dependencies. */
const CARGO = "cargo run -q --offline";

let harness: PauseRestore;
before(async () => {
  await requireImage(RUST_IMAGE);
  harness = await startPauseRestore();
});
after(async () => {
  await harness?.close();
});

describe("a cargo workspace restored after a pause (Rust image)", () => {
  it("cargo rebuilds a crate whose source changed same-size before the pause", async () => {
    const results = await harness.run({
      image: RUST_IMAGE,
      files: [
        file("Cargo.toml", '[package]\nname = "m"\nversion = "0.1.0"\nedition = "2021"\n'),
        file("src/main.rs", 'fn main() {\n    println!("value=old");\n}\n'),
      ],
      before: [sh("build", CARGO), edit("edit", "src/main.rs", "value=old", "value=new")],
      after: [sh("run", CARGO)],
    });
    assert.equal(stdoutOf(results, "build").trim(), "value=old");
    assert.ok(results.get("edit")?.ok);
    assert.equal(stdoutOf(results, "run").trim(), "value=new", "cargo rebuilt the edited crate");
  });
});
