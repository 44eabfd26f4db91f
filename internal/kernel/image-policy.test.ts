/**
 * Image references and the policy's sandbox.images: normalisation as the engine reads a
 * reference, hostile references refused with the reason, patterns, digests only.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { looksLikeReference, parseImageReference } from "../sandbox/image-reference.ts";
import { decideImage, imagePatternProblem } from "./image-policy.ts";
import { parsePolicy } from "./policy-loader.ts";

const D = `sha256:${"a".repeat(64)}`;

describe("image references", () => {
  it("normalises as the engine does", () => {
    const cases: [string, string][] = [
      ["python", "docker.io/library/python:latest"],
      ["python:3.12", "docker.io/library/python:3.12"],
      ["team/app:1", "docker.io/team/app:1"],
      ["Registry.Example.com:5000/team/app", "registry.example.com:5000/team/app:latest"],
      ["localhost/app:x", "localhost/app:x"],
      [`python@${D}`, `docker.io/library/python@${D}`],
      [`127.0.0.1:5000/a/b:t@${D}`, `127.0.0.1:5000/a/b:t@${D}`],
      ["a__b/c-d.e:Tag_1.0", "docker.io/a__b/c-d.e:Tag_1.0"],
    ];
    for (const [input, want] of cases) {
      const r = parseImageReference(input);
      assert.ok(!("error" in r), `${input}: ${"error" in r ? r.error : ""}`);
      assert.equal(r.normalised, want, input);
    }
  });

  it("refuses hostile references, saying why and quoting at most 80 characters", () => {
    const cases: [string, RegExp][] = [
      ["", /empty/],
      [`a/${"b".repeat(600)}`, /longer than 512/],
      ["Team/App", /lowercase/],
      ["team/../app", /\.\. part|must be lowercase letters/],
      ["team/./app", /\. or \.\. part/],
      ["team/app tag", /spaces/],
      ["team/app\n:1", /control/],
      ["team/app\u0000", /control/],
      ["team/äpp", /non-ASCII/],
      ["a@b@c", /more than one @/],
      ["app@sha256:abc", /digest/],
      [`app@md5:${"a".repeat(32)}`, /digest/],
      ["app:-x", /tag/],
      [`app:${"t".repeat(129)}`, /tag/],
      ["//app", /empty part/],
      ["team//app", /empty part/],
      ["-bad.host/app", /registry/],
      ["host.example:99999/app", /port/],
      ["team/app_/x", /repository part/],
      [`${"a".repeat(250)}/${"b".repeat(10)}`, /255/],
    ];
    for (const [input, want] of cases) {
      const r = parseImageReference(input);
      assert.ok("error" in r, `${JSON.stringify(input)} should be refused`);
      assert.match(r.error, want, JSON.stringify(input));
      assert.ok(r.error.length < 300, "an error never echoes a long input whole");
    }
  });

  it("tells references from agentd's image names", () => {
    assert.equal(looksLikeReference("python"), false);
    assert.equal(looksLikeReference("python:3.12"), true);
    assert.equal(looksLikeReference("team/app"), true);
    assert.equal(looksLikeReference(`app@${D}`), true);
  });
});

describe("sandbox.images", () => {
  const policy = {
    images: ["registry.example.com/team/*", "docker.io/library/python:3.12*"],
    imageDigests: false,
  };

  it("allows what a pattern matches, naming the pattern", () => {
    const a = decideImage("registry.example.com/team/app:1", policy);
    assert.ok(a.ok);
    assert.equal(a.pattern, "registry.example.com/team/*");
    assert.ok(decideImage("python:3.12-slim", policy).ok);
    assert.ok(decideImage(`registry.example.com/team/app@${D}`, policy).ok);
  });

  it("refuses the rest, naming the image and the patterns", () => {
    const cases = [
      "registry.example.com/team/sub/app:1", // * does not cross /
      "registry.example.com/other/app",
      "python:3.11",
      "evil.example.com/registry.example.com/team/app",
    ];
    for (const input of cases) {
      const d = decideImage(input, policy);
      assert.ok(!d.ok, input);
      assert.match(d.why, /refused/);
      assert.match(d.why, /registry\.example\.com\/team\/\*/);
    }
  });

  it("refuses everything when the list is empty, and ** allows any reference", () => {
    const d = decideImage("python:3.12", { images: [], imageDigests: false });
    assert.ok(!d.ok);
    assert.match(d.why, /sandbox\.images is empty/);
    assert.ok(decideImage("a.example/b/c:d", { images: ["**"], imageDigests: false }).ok);
    assert.ok(!decideImage("Bad/Ref", { images: ["**"], imageDigests: false }).ok);
  });

  it("takes only digests when imageDigests is set (the strict profile)", () => {
    const strict = { ...policy, imageDigests: true };
    const tag = decideImage("registry.example.com/team/app:1", strict);
    assert.ok(!tag.ok);
    assert.match(tag.why, /pinned by digest/);
    assert.ok(decideImage(`registry.example.com/team/app@${D}`, strict).ok);
  });

  it("checks patterns in the policy file, naming the field", () => {
    assert.match(imagePatternProblem("python:3.12") ?? "", /docker\.io\/library\/python:3\.12/);
    assert.match(imagePatternProblem("a b/c") ?? "", /characters/);
    assert.equal(imagePatternProblem("registry.example.com/team/*"), undefined);
    const bad = parsePolicy(
      "version: 1\nsandbox:\n  images: [python]\n  registryAuth:\n    - { registry: r.example, username: u, password: hunter2 }\n",
      "p.yaml",
    );
    assert.ok(!bad.ok);
    const text = JSON.stringify(bad.errors);
    assert.match(text, /sandbox\.images\.0/);
    assert.match(text, /sandbox\.registryAuth\.0\.password/);
    assert.doesNotMatch(text, /hunter2/);
    const good = parsePolicy(
      "version: 1\nsandbox:\n  images: [r.example/t/*]\n  imageDigests: true\n  registryAuth:\n    - { registry: r.example:5000, username: u, password: $ENV.REG_PW }\n",
      "p.yaml",
    );
    assert.ok(good.ok, JSON.stringify(good.ok ? "" : good.errors));
    assert.deepEqual(good.policy.sandbox.images, ["r.example/t/*"]);
  });
});
