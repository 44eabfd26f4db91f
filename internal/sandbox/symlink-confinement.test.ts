/** Symlink resolution without a file system, and which changed links a patch must leave out. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { confineSymlinks, resolveLink } from "./symlink-confinement.ts";

const tree = (links: Record<string, string>) => new Map(Object.entries(links));

describe("resolveLink", () => {
  it("follows links component by component, as the kernel does", () => {
    const links = tree({ a: "b/c", "b/c": "../d", up: "..", abs: "/etc", self: "self", dot: "." });
    const at = (p: string) => links.get(p);
    assert.deepEqual(resolveLink("a", at), { inside: true, via: ["a", "b/c"] });
    assert.equal(resolveLink("up", at).reason, "leads out of the workspace");
    assert.equal(resolveLink("abs", at).reason, "points to an absolute path");
    assert.equal(resolveLink("self", at).reason, "is a symlink loop or a chain too long");
    assert.equal(resolveLink("dot", at).inside, true);
    // `..` after a link climbs from where the link leads, not from where it sits.
    const chain = tree({ "x/y": "../..", here: ".", out: "here/.." });
    assert.equal(resolveLink("x/y", (p) => chain.get(p)).inside, false);
    assert.equal(resolveLink("out", (p) => chain.get(p)).inside, false);
    const deep = tree({ "a/b/l": "../../c", "a/b/m": "../../../c" });
    assert.equal(resolveLink("a/b/l", (p) => deep.get(p)).inside, true);
    assert.equal(resolveLink("a/b/m", (p) => deep.get(p)).inside, false);
  });

  it("a chain of 40 links resolves, 41 is too long", () => {
    const links = new Map<string, string>();
    for (let i = 0; i < 41; i++) links.set(`l${i}`, `l${i + 1}`);
    assert.equal(resolveLink("l1", (p) => links.get(p)).inside, true);
    assert.equal(resolveLink("l0", (p) => links.get(p)).inside, false);
  });
});

describe("confineSymlinks", () => {
  it("leaves out changed links that lead out, and keeps the harmless ones they go through", () => {
    const links = tree({ here: ".", chain: "here/..", ok: "here/a", r: "/" });
    const out = confineSymlinks(links, new Set(["here", "chain", "ok", "r"]), new Map());
    assert.deepEqual([...out.keys()].sort(), ["chain", "r"]);
    assert.deepEqual([...links.keys()].sort(), ["here", "ok"]);
  });

  it("blames the changed link an unchanged one leads out through, and gives it back its base target", () => {
    const base = tree({ y: "a/b", x: "y/.." });
    const links = tree({ y: ".", x: "y/.." });
    const out = confineSymlinks(links, new Set(["y"]), base);
    assert.deepEqual(
      [...out],
      [["y", "a symlink through which another symlink leads out of the workspace"]],
    );
    assert.equal(links.get("y"), "a/b");
  });

  it("a base that already leads out on its own blames nothing", () => {
    const links = tree({ y: ".", x: "y/..", fresh: "y" });
    assert.equal(confineSymlinks(links, new Set(["fresh"]), tree({ y: ".", x: "y/.." })).size, 0);
  });
});

describe("links into .git", () => {
  it("every spelling of .git, and any path under it, is left out; look-alikes are kept", () => {
    const into = [
      ".git",
      ".GIT",
      ".Git",
      ".gIt",
      "./.git",
      "a/../.git",
      ".git/",
      ".git/config",
      ".GIT/hooks/pre-commit",
      "./a/.././.Git/hooks",
      "here/.git",
      ".git.",
      "git~1",
      "sub/../../x/.git".replace("../../x/", "../"),
    ];
    const kept = [".github", ".gitignore", "git", "a/.gitkeep", ".git-blame-ignore-revs"];
    const links: Record<string, string> = { here: "." };
    into.forEach((t, i) => {
      links[`in${i}`] = t;
    });
    kept.forEach((t, i) => {
      links[`ok${i}`] = t;
    });
    const all = tree(links);
    for (let i = 0; i < into.length; i++)
      assert.equal(
        resolveLink(`in${i}`, (p) => all.get(p)).reason,
        "points into .git",
        `in${i} -> ${into[i]}`,
      );
    const changed = new Set(Object.keys(links));
    const out = confineSymlinks(all, changed, new Map());
    assert.deepEqual([...out.keys()].sort(), into.map((_, i) => `in${i}`).sort());
    for (const reason of out.values()) assert.equal(reason, "a symlink that points into .git");
    assert.deepEqual([...all.keys()].sort(), ["here", ...kept.map((_, i) => `ok${i}`)].sort());
  });

  it("a chain that reaches .git only through other links: no link left leads into it", () => {
    const links = tree({ d: ".", x: "g/hooks", g: "d/.GIT" });
    const out = confineSymlinks(links, new Set(["g", "x"]), new Map([["d", "."]]));
    assert.ok(out.has("g"));
    for (const p of links.keys()) assert.ok(resolveLink(p, (q) => links.get(q)).inside, p);
  });
});
