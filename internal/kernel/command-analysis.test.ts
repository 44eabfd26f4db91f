/** The command analysis: commands seen, dynamic and destructive forms, scripts, paths. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { analyzeCommand, commandMatches } from "./command-analysis.ts";

const names = (line: string) => analyzeCommand(line).commands.map((c) => c.name);

describe("analyzeCommand", () => {
  it("sees the command behind wrappers, multi-call binaries and find -exec", () => {
    assert.deepEqual(names("nice -n 10 timeout -s KILL 5 env -u X A=1 rm x"), [
      "nice",
      "timeout",
      "env",
      "rm",
    ]);
    assert.deepEqual(names("busybox rm x; toybox unlink y; /bin/busybox sed p f"), [
      "busybox",
      "rm",
      "toybox",
      "unlink",
      "busybox",
      "sed",
    ]);
    assert.deepEqual(names("find . -exec grep -l x {} + -execdir rm {} \\;"), [
      "find",
      "grep",
      "rm",
    ]);
    assert.deepEqual(names("xargs -I{} -P4 cp {} /tmp"), ["xargs", "cp"]);
    assert.deepEqual(names("command -v rm"), ["command"], "command -v only looks the name up");
    assert.deepEqual(names("npx tsx s.ts"), ["npx", "tsx"]);
  });
  it("keeps the wrapper's own options apart from the command", () => {
    const a = analyzeCommand("timeout 5 npm test");
    assert.deepEqual(a.commands[1], { name: "npm", args: ["test"] });
    assert.deepEqual(analyzeCommand("nice --bogus 3 ls").dynamic, [
      "nice option --bogus the analysis does not know",
    ]);
  });
  it("reports destructive forms, whatever the policy lists", () => {
    const d = (l: string) => analyzeCommand(l).destructive;
    assert.deepEqual(d("find / -delete"), ["find -delete"]);
    assert.deepEqual(d("find . -exec shred {} +"), ["find -exec shred", "shred"]);
    assert.deepEqual(d("dd if=a of=b"), ["dd of="]);
    assert.deepEqual(d("dd if=a"), []);
    assert.deepEqual(d("git clean -n"), [], "a dry run");
    assert.deepEqual(d("git restore --staged a"), []);
    assert.deepEqual(d("git checkout -b x"), []);
    assert.deepEqual(d("mv a b; cp a b"), [], "renames and copies show in the diff");
  });
  it("lists the files that decide what runs, from the working directory", () => {
    const s = (l: string, cwd?: string) =>
      analyzeCommand(l, cwd === undefined ? {} : { cwd }).scripts;
    assert.deepEqual(s("sh s.sh"), ["s.sh"]);
    assert.deepEqual(s("./bin/x", "pkg"), ["pkg/bin/x"]);
    assert.deepEqual(s("bash ../s.sh", "pkg/sub"), ["pkg/s.sh"]);
    assert.deepEqual(s("/workspace/tools/x.sh"), ["tools/x.sh"]);
    assert.deepEqual(s("make -C sub"), ["sub/GNUmakefile", "sub/makefile", "sub/Makefile"]);
    assert.deepEqual(s("cd a && cd b && ./x"), ["x", "a/x", "b/x", "a/b/x"]);
    assert.deepEqual(s("python3 -m pkg.tool"), [
      "pkg/tool.py",
      "pkg/tool/__main__.py",
      "pkg/tool/__init__.py",
      "pkg/__init__.py",
    ]);
    assert.deepEqual(
      s("python3 --weird x -u app.py"),
      ["x", "app.py"],
      "an unknown option may take a value",
    );
    assert.deepEqual(s("node --title x app.js"), ["app.js"]);
    assert.deepEqual(s("ls; cat x"), []);
  });
  it("makes a script path the line cannot pin down dynamic", () => {
    const dyn = (l: string) => analyzeCommand(l).dynamic.join(" | ");
    assert.match(dyn("sh ../../x.sh"), /outside the workspace/);
    assert.match(dyn("sh /tmp/x.sh"), /outside the workspace/);
    assert.match(dyn("cd $D && sh s.sh"), /directory the line does not show/);
    assert.match(dyn("sh s$X.sh"), /parameter \$X/);
    assert.match(dyn("./*.sh"), /a glob/);
  });
  it("notices a line that writes what it runs", () => {
    const dyn = (l: string) => analyzeCommand(l).dynamic.join(" | ");
    assert.match(dyn("echo x > s.sh; sh s.sh"), /writes s\.sh, which it runs/);
    assert.match(dyn("cd a && echo x > s.sh && sh s.sh"), /writes s\.sh/);
    assert.match(dyn("unzip x.zip && make"), /unzip may write/);
    assert.equal(dyn("echo x > log.txt; sh s.sh"), "");
    assert.equal(dyn("make; make test"), "");
    assert.equal(dyn("mkdir -p out && make"), "");
  });
  it("collects paths and globs, expanding braces", () => {
    const a = analyzeCommand("cat a.txt {b,c}.txt *.md x=y <in >out");
    assert.deepEqual(a.globs, ["*.md"]);
    for (const p of ["a.txt", "b.txt", "c.txt", "x=y", "in", "out"])
      assert.ok(a.paths.includes(p), p);
    assert.deepEqual(a.writes, ["out"]);
    assert.deepEqual(analyzeCommand("cat {1..999}").dynamic, [
      "brace expansion too large to check",
    ]);
  });
  it("flags environment that changes which program runs", () => {
    for (const l of [
      "PATH=. ls",
      "export LD_PRELOAD=x",
      "env GIT_PAGER=x git log",
      "IFS=/ x",
      "declare -x NODE_OPTIONS=x",
    ])
      assert.ok(
        analyzeCommand(l).dynamic.some((d) => d.startsWith("sets ")),
        l,
      );
    for (const l of ["CI=1 npm test", "NODE_ENV=test node x.js", "FOO=bar ls"])
      assert.deepEqual(analyzeCommand(l).dynamic, [], l);
  });
  it("follows nested shell code and gives up past its depth", () => {
    assert.ok(names("sh -c 'bash -c \"rm x\"'").includes("rm"));
    let line = "rm x";
    for (let i = 0; i < 12; i++) line = `sh -c ${JSON.stringify(line)}`;
    assert.ok(analyzeCommand(line).dynamic.includes("nesting too deep"));
  });
});

describe("commandMatches", () => {
  it("matches a name and arguments in order", () => {
    const c = analyzeCommand("git -C x push origin main; find . -name x -delete").commands;
    assert.ok(commandMatches(c, "git push"));
    assert.ok(commandMatches(c, "find -delete"));
    assert.ok(!commandMatches(c, "git pull"));
    assert.ok(!commandMatches(c, "find -exec rm"));
  });
});

describe("build tools told to run a file of the line's choosing", () => {
  it("gradle -I/-b/-c and mvn -f/-s are dynamic; ordinary flags are not", () => {
    for (const line of [
      "gradle build -I evil.gradle",
      "./gradlew test --init-script=x.gradle",
      "gradle -Ievil.gradle build",
      "gradle build -b other.gradle",
      "mvn test -s settings.xml",
      "./mvnw -f /tmp/pom.xml test",
    ])
      assert.notDeepEqual(analyzeCommand(line, { cwd: "." }).dynamic, [], line);
    for (const line of ["gradle build", "mvn test -Dtest=Foo", "./gradlew test --info"])
      assert.deepEqual(analyzeCommand(line, { cwd: "." }).dynamic, [], line);
  });
});
