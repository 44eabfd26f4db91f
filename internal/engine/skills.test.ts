/**
 * Skills: discovery order and override, broken skills reported and skipped, triggers,
 * unknown named skills, the byte budget, and the repository's own skills/ folder.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isAgentdError } from "../errors.ts";
import {
  loadSkills,
  matchTriggers,
  renderSkill,
  type Skill,
  selectSkills,
  UnknownSkillError,
} from "./skills.ts";

function skillMd(name: string, extra = "", body = `Body of ${name}.`): string {
  return `---\nname: ${name}\ndescription: The ${name} skill\nversion: 1.0.0\n${extra}---\n\n${body}\n`;
}

function skill(name: string, triggers: string[] = [], body = `Body of ${name}.`): Skill {
  return { name, description: `The ${name} skill`, version: "1", triggers, body, source: "test" };
}

describe("loadSkills", () => {
  let serverDir: string;
  before(async () => {
    serverDir = await mkdtemp(join(tmpdir(), "agentd-skills-"));
    const put = async (name: string, content: string) => {
      await mkdir(join(serverDir, name), { recursive: true });
      await writeFile(join(serverDir, name, "SKILL.md"), content);
    };
    await put("alpha", skillMd("alpha", "", "server alpha"));
    await put("beta", skillMd("beta", "", "server beta"));
    await put("gamma", skillMd("gamma", "", "server gamma"));
    await mkdir(join(serverDir, "empty-dir")); // no SKILL.md: ignored
  });
  after(() => rm(serverDir, { recursive: true, force: true }));

  it("prefers .agent/skills, then .skills, then the server, and reports what it shadowed", async () => {
    const { skills, problems, shadowed } = await loadSkills({
      serverDir,
      workspaceFiles: [
        { path: ".skills/alpha/SKILL.md", content: skillMd("alpha", "", "installed alpha") },
        { path: ".skills/beta/SKILL.md", content: skillMd("beta", "", "installed beta") },
        { path: ".agent/skills/alpha/SKILL.md", content: skillMd("alpha", "", "local alpha") },
        { path: "./.agent/skills/delta/SKILL.md", content: skillMd("delta", "", "local delta") },
        { path: ".agent/skills/delta/examples/x.md", content: "not a skill" },
        { path: "src/skills/zeta/SKILL.md", content: skillMd("zeta") }, // not a skill root
      ],
    });
    assert.deepEqual(problems, []);
    assert.deepEqual(
      skills.map((s) => [s.name, s.body, s.source]),
      [
        ["alpha", "local alpha", "workspace:.agent/skills/alpha/SKILL.md"],
        ["beta", "installed beta", "workspace:.skills/beta/SKILL.md"],
        ["delta", "local delta", "workspace:.agent/skills/delta/SKILL.md"],
        ["gamma", "server gamma", `server:${join(serverDir, "gamma", "SKILL.md")}`],
      ],
    );
    assert.deepEqual(
      shadowed.map((s) => [s.name, s.file, s.by]),
      [
        ["alpha", ".skills/alpha/SKILL.md", "workspace:.agent/skills/alpha/SKILL.md"],
        ["alpha", join(serverDir, "alpha", "SKILL.md"), "workspace:.agent/skills/alpha/SKILL.md"],
        ["beta", join(serverDir, "beta", "SKILL.md"), "workspace:.skills/beta/SKILL.md"],
      ],
    );
  });

  it("reports broken skills (name, file, what is wrong) and skips them without failing", async () => {
    const broken = [
      [".agent/skills/nofm/SKILL.md", "# just markdown\n"],
      [".agent/skills/badyaml/SKILL.md", "---\nname: [unclosed\n---\nbody\n"],
      [".agent/skills/nodesc/SKILL.md", "---\nname: nodesc\nversion: 1.0.0\n---\nbody\n"],
      [".agent/skills/badname/SKILL.md", skillMd("Bad_Name")],
      [".agent/skills/other/SKILL.md", skillMd("mismatch")],
      [".agent/skills/badre/SKILL.md", skillMd("badre", "triggers:\n  - ok\n  - /([a-z/\n")],
      [".agent/skills/emptybody/SKILL.md", skillMd("emptybody", "", "")],
      [".agent/skills/huge/SKILL.md", skillMd("huge", "", "x".repeat(70_000))],
      [".agent/skills/gamma/SKILL.md", "---\nname: gamma\n---\n"], // broken override
    ];
    const { skills, problems } = await loadSkills({
      serverDir,
      workspaceFiles: [
        ...broken.map(([path, content]) => ({ path: path as string, content: content as string })),
        { path: ".agent/skills/good/SKILL.md", content: skillMd("good") },
      ],
    });
    const byFile = new Map(problems.map((p) => [p.file, p]));
    const msg = (dir: string) => byFile.get(`.agent/skills/${dir}/SKILL.md`)?.message ?? "";
    assert.equal(problems.length, broken.length);
    assert.match(msg("nofm"), /no YAML front matter/);
    assert.match(msg("badyaml"), /not valid YAML/);
    assert.match(msg("nodesc"), /^description: /);
    assert.match(msg("badname"), /^name: must be \[a-z0-9-\]/);
    assert.match(msg("other"), /name "mismatch" does not match its directory "other"/);
    assert.equal(byFile.get(".agent/skills/other/SKILL.md")?.name, "mismatch");
    assert.match(msg("badre"), /^triggers\.1: invalid regular expression/);
    assert.match(msg("emptybody"), /body is empty/);
    assert.match(msg("huge"), /larger than 65536 bytes/);
    assert.match(msg("gamma"), /^description: /);
    // The good ones load; a broken override falls back to the server's skill.
    assert.deepEqual(
      skills.map((s) => `${s.name}:${s.body}`),
      ["alpha:server alpha", "beta:server beta", "gamma:server gamma", "good:Body of good."],
    );
  });

  it("accepts CRLF files, a numeric version and extra front matter keys", async () => {
    const content =
      "---\r\nname: crlf\r\ndescription: d\r\nversion: 2\r\nlicense: MIT\r\ntriggers: [deploy]\r\n---\r\nBody\r\n";
    const { skills, problems } = await loadSkills({
      serverDir: join(serverDir, "does-not-exist"),
      workspaceFiles: [{ path: ".skills/crlf/SKILL.md", content }],
    });
    assert.deepEqual(problems, []);
    assert.deepEqual(skills[0], {
      name: "crlf",
      description: "d",
      version: "2",
      triggers: ["deploy"],
      body: "Body",
      source: "workspace:.skills/crlf/SKILL.md",
    });
  });
});

/**
 * Limits for tests of what matches: a trivial regex on a loaded machine can outlast the
 * default 50 ms of wall clock. Only the interrupt's own test keeps the defaults.
 */
const NO_RUSH = { totalMs: 60_000, regexMs: 60_000 };

describe("selectSkills", () => {
  const all = [
    skill("fix-failing-test", ["failing test", "/\\btests?\\b.{0,40}\\bfail/i"]),
    skill("write-unit-tests", ["test coverage"]),
    skill("review-diff", ["review"]),
    skill("deploy", ["deploy"]),
  ];

  it("takes named skills in the caller's order, then triggered ones by name", () => {
    const sel = selectSkills(all, {
      named: ["review-diff", "deploy", "review-diff"],
      prompt: "The failing test in parser.ts; improve TEST   COVERAGE too.",
    });
    assert.deepEqual(
      sel.skills.map((s) => s.name),
      ["review-diff", "deploy", "fix-failing-test", "write-unit-tests"],
    );
    assert.deepEqual(sel.why, {
      "review-diff": "named",
      deploy: "named",
      "fix-failing-test": "trigger failing test",
      "write-unit-tests": "trigger test coverage",
    });
    assert.deepEqual(sel.dropped, []);
  });

  it("matches keywords as whole words and regexes as written", () => {
    const names = (prompt: string) =>
      selectSkills(all, { named: [], prompt, triggerLimits: NO_RUSH }).skills.map((s) => s.name);
    assert.deepEqual(names("please redeploy the reviewer's branch"), []); // not whole words
    assert.deepEqual(names("Deploy it"), ["deploy"]);
    assert.deepEqual(names("the unit tests in ci fail since Monday"), ["fix-failing-test"]);
    assert.deepEqual(names(""), []);
  });

  it("names every unknown skill in a typed error", () => {
    assert.throws(
      () => selectSkills(all, { named: ["deploy", "nope", "also-nope"], prompt: "" }),
      (err: unknown) =>
        err instanceof UnknownSkillError &&
        isAgentdError(err, "ENOTFOUND") &&
        err.field === "skills" &&
        err.names.join() === "nope,also-nope" &&
        err.message === "unknown skills: nope, also-nope",
    );
  });

  it("caps the skill text by a byte budget, dropping (never cutting) what does not fit", () => {
    const big = skill("big", ["huge"], "x".repeat(3000));
    const small = [skill("a-small", ["huge"]), skill("b-small", ["huge"])];
    const size = (s: Skill) => Buffer.byteLength(renderSkill(s));
    const budget = size(big) + size(small[0] as Skill);
    const sel = selectSkills([big, ...small], {
      named: ["big"],
      prompt: "a huge task",
      budgetBytes: budget,
    });
    assert.deepEqual(
      sel.skills.map((s) => s.name),
      ["big", "a-small"],
    );
    assert.deepEqual(sel.dropped, [
      { name: "b-small", reason: `over the skill budget (${size(small[1] as Skill)} bytes)` },
    ]);
    assert.equal(sel.why["b-small"], undefined);
    const total = sel.skills.reduce((n, s) => n + size(s), 0);
    assert.ok(total <= budget);
  });

  it("interrupts a catastrophic regex trigger and reports it, keeping the others", () => {
    const evil = { ...skill("evil", ["/^(a+)+$/"]), source: "workspace:.skills/evil/SKILL.md" };
    const evil2 = {
      ...skill("evil2", ["/^(a|aa)+$/"]),
      source: "workspace:.skills/evil2/SKILL.md",
    };
    // The others match by keyword: a regex, even a trivial one, runs under a wall-clock
    // limit, which a loaded machine (the thread descheduled) can use up on its own.
    const fine = { ...skill("fine", ["fine"]), source: "workspace:.skills/fine/SKILL.md" };
    const server = { ...skill("zz-server", ["server"]), source: "server:/skills/zz/SKILL.md" };
    // Unbounded, evil backtracks about 2^40 times on this prompt (hours), evil2 about 10^8
    // times: both reported as timed out is the interrupt firing (bench/hostile-input.ts has
    // how long the selection takes).
    const sel = selectSkills([evil, evil2, fine, server], {
      named: [],
      prompt: `${"a".repeat(40)}! fine, says the server`,
    });
    assert.deepEqual(
      sel.skills.map((s) => s.name),
      ["fine", "zz-server"],
    );
    assert.deepEqual(sel.dropped, [
      { name: "evil", reason: "trigger timed out" },
      { name: "evil2", reason: "trigger timed out" },
    ]);
    const aaa = { ...skill("aaa", ["/a{3}/"]), source: "workspace:.skills/aaa/SKILL.md" };
    assert.deepEqual(matchTriggers([aaa], "xaaay", NO_RUSH).get("aaa"), { matched: "/a{3}/" });
    assert.equal(matchTriggers([aaa], "xaay", NO_RUSH).get("aaa"), undefined);
  });
});

describe("the repository's skills/ folder", () => {
  it("loads every shipped skill without a problem", async () => {
    const serverDir = new URL("../../skills", import.meta.url).pathname;
    const { skills, problems } = await loadSkills({ serverDir, workspaceFiles: [] });
    assert.deepEqual(problems, []);
    const names = skills.map((s) => s.name);
    assert.deepEqual(names, ["fix-failing-test", "review-diff", "write-unit-tests"]);
    const capabilities = [
      "repo.search",
      "repo.read",
      "repo.patch",
      "process.run",
      "test.run",
      "lint.run",
    ];
    for (const s of skills) {
      assert.ok(s.triggers.length > 0, `${s.name} has triggers`);
      assert.ok(
        capabilities.some((c) => s.body.includes(`\`${c}\``)),
        `${s.name} names the capabilities it uses`,
      );
    }
    const pick = (prompt: string) =>
      selectSkills(skills, { named: [], prompt, triggerLimits: NO_RUSH }).skills.map((s) => s.name);
    assert.deepEqual(pick("Fix the failing test in test/parser.test.ts"), ["fix-failing-test"]);
    assert.deepEqual(pick("tests are failing on main since the last merge"), ["fix-failing-test"]);
    assert.deepEqual(pick("Write unit tests for src/money.ts"), ["write-unit-tests"]);
    assert.deepEqual(pick("Please review the uncommitted changes"), ["review-diff"]);
    assert.deepEqual(pick("Rename the config option port to listen"), []);
    // All three fit the default budget together.
    const sel = selectSkills(skills, { named: names, prompt: "" });
    assert.deepEqual(sel.dropped, []);
  });
});
