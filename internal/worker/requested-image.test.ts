/**
 * Which image a run asked for: CreateRun's over the workspace's, references here and bare
 * names for the image chooser; `.agent/config.yaml` read defensively; refusals name where
 * the image was named.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema, RunQueuedSchema } from "../gen/agentd/v1/events_pb.js";
import { testImagePolicy } from "../testing/worker-fixtures.ts";
import {
  checkRequestedImage,
  imageOfConfig,
  requestedImage,
  requestedImageName,
} from "./requested-image.ts";

const queued = (image: string): Event[] => [
  create(EventSchema, {
    type: "run.queued",
    payload: { case: "runQueued", value: create(RunQueuedSchema, { image }) },
  }),
];

describe("the image a run asked for", () => {
  it("takes CreateRun's over the workspace's, references here and names for the chooser", () => {
    assert.deepEqual(requestedImage(queued("r.example/a/b:1"), "r.example/c/d:2"), {
      input: "r.example/a/b:1",
      from: "request",
    });
    assert.deepEqual(requestedImage(queued(""), "r.example/c/d:2"), {
      input: "r.example/c/d:2",
      from: "workspace",
    });
    assert.equal(requestedImage(queued("python"), "r.example/c/d:2"), undefined);
    assert.deepEqual(requestedImageName(queued("python"), "r.example/c/d:2"), {
      input: "python",
      from: "request",
    });
    assert.deepEqual(requestedImageName(queued(""), "go"), { input: "go", from: "workspace" });
    assert.equal(requestedImageName(queued(""), "r.example/c/d:2"), undefined);
    assert.equal(requestedImage(queued(""), undefined), undefined);
    assert.equal(requestedImage([], undefined), undefined);
  });

  it("reads image: from .agent/config.yaml, and nothing from a broken or hostile file", () => {
    assert.equal(imageOfConfig(Buffer.from("image: r.example/a/b:1\n")), "r.example/a/b:1");
    assert.equal(imageOfConfig(Buffer.from("image: [1, 2]\n")), undefined);
    assert.equal(imageOfConfig(Buffer.from("image: 3\n")), undefined);
    assert.equal(imageOfConfig(Buffer.from(": : :\n\t- [")), undefined);
    assert.equal(imageOfConfig(Buffer.from("- a\n- b\n")), undefined);
    assert.equal(imageOfConfig(undefined), undefined);
    const bomb = `a: &a [x,x,x,x,x,x,x,x]\n${Array.from({ length: 12 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)},*${String.fromCharCode(97 + i)}]`).join("\n")}\nimage: r.example/a/b:1\n`;
    assert.equal(imageOfConfig(Buffer.from(bomb)), undefined, "an alias bomb is not expanded");
  });

  it("names where a refused image was named", () => {
    const p = testImagePolicy();
    const policy = { ...p, sandbox: { ...p.sandbox, images: ["r.example/team/*"] } };
    const fromRequest = checkRequestedImage(
      { input: "r.example/other/x:1", from: "request" },
      policy,
    );
    assert.ok(!fromRequest.ok);
    assert.match(fromRequest.message, /^CreateRun image: image r\.example\/other\/x:1 is refused/);
    const fromFile = checkRequestedImage({ input: "R.example/Team/x", from: "workspace" }, policy);
    assert.ok(!fromFile.ok);
    assert.match(fromFile.message, /^\.agent\/config\.yaml image: .*lowercase/);
    const ok = checkRequestedImage({ input: "r.example/team/x:1", from: "workspace" }, policy);
    assert.ok(ok.ok);
    assert.equal(ok.ref.normalised, "r.example/team/x:1");
  });
});
