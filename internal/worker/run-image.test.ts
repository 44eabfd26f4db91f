/** chooseRunImage: the order of the sources, the fallback to base, hostile inputs. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { configImage } from "../tools/detect-commands.ts";
import { BASE_IMAGE, chooseRunImage, ecosystemImage, type RunImageInput } from "./run-image.ts";

const all = () => true;
const none = () => false;
const go = { ecosystem: "go" as const, reason: "go.mod (test command: go)" };

function input(over: Partial<RunImageInput> = {}): RunImageInput {
  return { config: {}, detected: go, present: all, ...over };
}

describe("chooseRunImage", () => {
  it("detection picks the ecosystem's image and says from which file", () => {
    assert.deepEqual(chooseRunImage(input()), {
      image: "agentd-sandbox-go:latest",
      ecosystem: "go",
      reason: "detected go from go.mod (test command: go)",
    });
  });

  it("the policy's image wins over the config and detection", () => {
    const r = chooseRunImage(
      input({
        policyImage: "registry.example/acme:1",
        config: { ecosystem: "rust" },
        present: none,
      }),
    );
    assert.deepEqual(r, {
      image: "registry.example/acme:1",
      ecosystem: "",
      reason: "policy sandbox.image",
    });
  });

  it(".agent/config.yaml image: wins over detection", () => {
    const r = chooseRunImage(input({ config: { ecosystem: "python" } }));
    assert.deepEqual(r, {
      image: "agentd-sandbox-python:latest",
      ecosystem: "python",
      reason: ".agent/config.yaml image",
    });
    const base = chooseRunImage(input({ config: { ecosystem: "base" }, present: none }));
    assert.deepEqual([base.image, base.ecosystem], [BASE_IMAGE, "base"]);
  });

  it("a bad config value is not taken: detection decides and the reason says why", () => {
    const bad = configImage(Buffer.from("image: pyhton\n"));
    const r = chooseRunImage(input({ config: bad }));
    assert.equal(r.image, "agentd-sandbox-go:latest");
    assert.match(
      r.reason,
      /^\.agent\/config\.yaml: image: unknown ecosystem "pyhton".* \(not taken\); detected go from go\.mod/,
    );
  });

  it("an image missing from the engine falls back to base, naming it and how to build it", () => {
    const r = chooseRunImage(input({ present: (i) => i !== "agentd-sandbox-go:latest" }));
    assert.equal(r.image, BASE_IMAGE);
    assert.equal(r.ecosystem, "base");
    assert.match(
      r.reason,
      /agentd-sandbox-go:latest is not on the Docker engine \(make images IMAGES=go\), so base$/,
    );
    const cfg = chooseRunImage(input({ config: { ecosystem: "java" }, present: none }));
    assert.equal(cfg.image, BASE_IMAGE);
    assert.match(cfg.reason, /^\.agent\/config\.yaml image; agentd-sandbox-java:latest is not/);
  });

  it("a run that started keeps the very build it started on while the engine has it", () => {
    const id = `sha256:${"ab".repeat(32)}`;
    const started = {
      image: "agentd-sandbox-go:latest",
      ecosystem: "go",
      imageReason: "detected go from go.mod",
      imageDigest: id,
    };
    const pinned = chooseRunImage(input({ started, present: (i) => i === id }));
    assert.deepEqual(pinned, {
      image: "agentd-sandbox-go:latest",
      ecosystem: "go",
      reason: "detected go from go.mod",
      pin: id,
    });
    // make images moved the tag and the old build was removed: the tag as it is now, said.
    const gone = chooseRunImage(input({ started, present: (i) => i !== id }));
    assert.equal(gone.pin, undefined);
    assert.equal(gone.image, "agentd-sandbox-go:latest");
    assert.match(
      gone.reason,
      /the build it started on \(sha256:abababababab\) is gone from the engine/,
    );
  });

  it("a run that started keeps its image, whatever the policy or the engine says now", () => {
    const started = {
      image: "agentd-sandbox-rust:latest",
      ecosystem: "rust",
      imageReason: "Cargo.toml",
      imageDigest: "",
    };
    const r = chooseRunImage(input({ started, policyImage: "other:1", present: none }));
    assert.deepEqual(r, { image: started.image, ecosystem: "rust", reason: "Cargo.toml" });
    // A run.started from before image reasons were recorded.
    const old = chooseRunImage(
      input({ started: { image: "x:1", ecosystem: "", imageReason: "", imageDigest: "" } }),
    );
    assert.deepEqual(old, { image: "x:1", ecosystem: "", reason: "as run.started recorded" });
    const odd = chooseRunImage(
      input({
        started: { image: "x:1", ecosystem: "<script>", imageReason: "r", imageDigest: "" },
      }),
    );
    assert.equal(odd.ecosystem, "", "an unknown recorded ecosystem is not passed on");
  });

  it("every ecosystem maps to its make-images tag", () => {
    for (const e of ["python", "go", "rust", "java", "node", "base"] as const)
      assert.equal(ecosystemImage(e), `agentd-sandbox-${e}:latest`);
  });
});
