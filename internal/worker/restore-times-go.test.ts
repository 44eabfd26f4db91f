/**
 * Go's caches across a real pause (see restore-times.test.ts for the harness and the other
 * languages). `go test` keeps a passing package's result and replays it while the files the
 * test opened keep their size and mtime: restored with mtime 0, a same-size edit of test data
 * made before the pause would be answered from the cache, "(cached)", with the old output.
 * The build cache (GOCACHE) lives in the workspace here, so it is in the snapshot and comes
 * back with it, as a kept per-repository cache would. Needs the Go sandbox image
 * (agentd-sandbox-go:latest, built by `make images`); a missing image fails, never skips.
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

const GO_IMAGE = "agentd-sandbox-go:latest";
/**
 * Every go command: the build cache in the workspace, test binaries built there too (/tmp
 * is noexec and small), no toolchain download (there is no network).
 */
const GO =
  "export GOCACHE=/workspace/.gocache GOTMPDIR=/workspace/.gotmp GOTOOLCHAIN=local GOFLAGS=-buildvcs=false; mkdir -p $GOTMPDIR; ";

let harness: PauseRestore;
before(async () => {
  await requireImage(GO_IMAGE);
  harness = await startPauseRestore();
});
after(async () => {
  await harness?.close();
});

const TEST_DATA = `package data

import (
	"os"
	"testing"
)

func TestData(t *testing.T) {
	b, err := os.ReadFile("testdata/in.txt")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("data=%s", b)
}
`;

const TEST_VALUE = `package value

import "testing"

func TestValue(t *testing.T) { t.Logf("value=%s", Value) }
`;

describe("a Go workspace restored after a pause (Go image)", () => {
  it("go test reruns a package whose test data changed same-size, and builds the edited code", async () => {
    const results = await harness.run({
      image: GO_IMAGE,
      files: [
        file("go.mod", "module example.com/m\n\ngo 1.21\n"),
        file("value/value.go", 'package value\n\nconst Value = "old"\n'),
        file("value/value_test.go", TEST_VALUE),
        file("data/data_test.go", TEST_DATA),
        file("data/testdata/in.txt", "old\n"),
      ],
      before: [
        // Twice: the second run is answered from the test cache (the files are old enough).
        sh("warm", `${GO}go test -v ./... && go test -v ./...`),
        edit("edit-value", "value/value.go", '"old"', '"new"'),
        edit("edit-data", "data/testdata/in.txt", "old", "new"),
      ],
      after: [sh("test", `${GO}go test -v ./...`)],
    });
    const warm = stdoutOf(results, "warm");
    assert.match(warm, /data=old/);
    assert.match(warm, /ok\s+example\.com\/m\/data\s+\(cached\)/, "the test cache is in use");
    for (const id of ["edit-value", "edit-data"]) assert.ok(results.get(id)?.ok, id);
    const out = stdoutOf(results, "test");
    assert.match(out, /value=new/, "the edited code was built");
    assert.match(out, /data=new/, "the test read the edited data");
    assert.doesNotMatch(
      out,
      /example\.com\/m\/data\s+\(cached\)/,
      "the data package ran again, not from the cache",
    );
  });
});
