/** The ways of emptying or replacing a file the analysis reports as destructive. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { analyzeCommand } from "./command-analysis.ts";
import { emptyingRedirects } from "./command-empties.ts";
import { parseShell } from "./shell-syntax.ts";

const destroys = (line: string): string[] => analyzeCommand(line).destructive;

describe("emptyingRedirects", () => {
  it("reports a truncating redirection of a command that writes nothing", () => {
    for (const line of ["> f", ": > f", ">| f", "true &> f", "exec 3> f", "echo -n > f"]) {
      const cmd = parseShell(line).commands.at(-1);
      assert.ok(cmd);
      assert.equal(emptyingRedirects(cmd).reasons.length, 1, line);
    }
  });
  it("a redirection a later one of the same descriptor overrides, and counts of nothing, empty the file", () => {
    for (const line of [
      "echo hi > f > /dev/null",
      "echo hi > f >&2",
      "echo hi 1>f 1>&2",
      "echo hi > f 1>&-",
      "cat p > f > /dev/null",
      "head -c 0 /dev/zero > f",
      "head -n 0 p > f",
      "tail -c0 p > f",
      "head --bytes=0 p > f",
      "printf '%.0s' x > f",
    ]) {
      const cmd = parseShell(line).commands.at(-1);
      assert.ok(cmd);
      assert.equal(emptyingRedirects(cmd).reasons.length, 1, line);
    }
    // Descriptor 2 or 3 of a command that writes: the container tells (the replace probe).
    for (const line of ["echo hi 2> f", "echo x 3>f"]) {
      const cmd = parseShell(line).commands.at(-1);
      assert.ok(cmd);
      assert.deepEqual(
        emptyingRedirects(cmd).unseen.map((w) => w.text),
        ["f"],
        line,
      );
    }
    assert.ok(destroys("shuf -i 1-0 -o f").length > 0, "an empty range");
  });
  it("leaves appends, devices, duplications and commands that write alone", () => {
    for (const line of [
      ">> f",
      ": >> f",
      "true > /dev/null",
      "true 2>&1",
      "echo hi > f",
      "ls > f",
    ]) {
      const cmd = parseShell(line).commands.at(-1);
      assert.ok(cmd);
      assert.deepEqual(emptyingRedirects(cmd).reasons, [], line);
    }
  });
  it("tells input that is empty from input that is not", () => {
    assert.equal(destroys("cat > f").length, 1, "no input at all");
    assert.equal(destroys("cat < /dev/null > f").length, 1);
    assert.equal(destroys("head -n 3 /dev/null > f").length, 1);
    assert.deepEqual(destroys("echo x | cat > f"), []);
    assert.deepEqual(destroys("cat <<EOF > f\nx\nEOF"), []);
    assert.deepEqual(destroys("cat a > f"), []);
    assert.deepEqual(destroys("head -c 1048576 /dev/zero > big.bin"), [], "zeros are content");
    assert.equal(destroys("echo > f").length, 1, "one newline is no content");
    assert.equal(destroys("printf '%s' '' > f").length, 1);
    assert.deepEqual(destroys("printf '%s' hello > f"), []);
    assert.equal(destroys("dd if=/dev/null > f").length, 1);
    assert.deepEqual(destroys("cat < a > f"), []);
  });
  it("reports a command that reads the file its redirection empties", () => {
    assert.match(destroys("sort f > f").join(), /empties it before it is read/);
    assert.match(destroys("grep -v x ./f > f").join(), /empties it before it is read/);
    assert.deepEqual(destroys("echo f > f"), []);
  });
});

describe("copies and moves the container must judge", () => {
  const of = (line: string, cwd = ".") => analyzeCommand(line, { cwd });
  it("lists copy sources in groups, resolved against every directory of the line", () => {
    assert.deepEqual(of("cp e f").copySources, [{ from: ["e"], to: "f", missingEmpties: false }]);
    assert.deepEqual(
      of("cp a b dir/").copySources.map((g) => g.from),
      [["a"], ["b"]],
    );
    assert.deepEqual(of("cat a b > f").copySources, [
      { from: ["a", "b"], to: "f", missingEmpties: true },
    ]);
    assert.deepEqual(of("cp -t d a").copySources, [
      { from: ["a"], to: "d", missingEmpties: false },
    ]);
    assert.deepEqual(
      of("cat < e > f").copySources.map((g) => g.from),
      [["e"]],
    );
    assert.deepEqual(
      of("install -m 644 e f").copySources.map((g) => g.from),
      [["e"]],
    );
    assert.deepEqual(
      of("cp e f", "src").copySources.map((g) => g.from),
      [["src/e"]],
    );
    assert.deepEqual(
      of("cd src && cp ../e /workspace/x /tmp/y f").copySources.map((g) => g.from),
      [["/e"], ["e"], ["x"], ["x"], ["/tmp/y"], ["/tmp/y"]],
    );
    assert.deepEqual(
      of("cp src/*.ts backup/").copySources,
      [
        {
          from: ["src/*.ts"],
          to: "backup/",
          missingEmpties: false,
          made: ["src/*.ts"],
          patterned: true,
        },
      ],
      "a glob's files are counted empty and the target judged whole (failing closed)",
    );
    assert.equal(of("cp e src/[a].ts").copySources[0]?.unknownTarget, true);
    assert.equal(of("ln -s a.ts l && cp e l").copySources[0]?.unknownTarget, true);
    assert.equal(of("cp -r d/. src/").copySources[0]?.tree, true);
    assert.deepEqual(of("cat a >> f").copySources, [], "an append empties nothing");
    assert.match(of("cd /tmp && cp e f").dynamic.join(), /directory the line does not show/);
  });
  it("lists mv pairs unless -n or -i keeps the target", () => {
    assert.deepEqual(of("mv x f").moves, [["x", "f"]]);
    assert.deepEqual(of("mv a b dir").moves, [
      ["a", "dir"],
      ["b", "dir"],
    ]);
    assert.deepEqual(of("mv -n x f").moves, []);
    assert.deepEqual(of("mv --no-clobber x f").moves, []);
    assert.deepEqual(of("mv -i x f").moves, []);
  });
});

describe("emptying families", () => {
  it("tee and sponge empty their files unless they append", () => {
    assert.match(destroys("echo x | tee a b").join(), /tee a .*tee b/);
    assert.deepEqual(destroys("echo x | tee -a a"), []);
    assert.deepEqual(destroys("echo x | tee --append a"), []);
    assert.deepEqual(destroys("echo x | tee /dev/stderr"), []);
    assert.match(destroys("sponge f").join(), /sponge f/);
    assert.deepEqual(destroys("sponge -a f"), []);
  });
  it("ln -f, install and mv from /dev/null replace their target", () => {
    assert.match(destroys("ln -sf /dev/null f").join(), /ln -f/);
    assert.deepEqual(destroys("ln -s a b"), []);
    assert.deepEqual(destroys("ln -- -f b"), [], "-f after -- is a file name");
    assert.match(destroys("install /dev/null f").join(), /install \/dev\/null/);
    assert.deepEqual(destroys("install -m 755 tool bin/tool"), []);
    assert.match(destroys("mv /dev/null f").join(), /mv \/dev\/null/);
  });
  it("sed -i with a deleting script, -n or a script file", () => {
    assert.match(destroys("sed -i '/x/d' f").join(), /sed -i with d/);
    assert.match(destroys("sed -ni 1p f").join(), /sed -i -n/);
    assert.match(destroys("sed -i -f s.sed f").join(), /sed -i -f/);
    assert.deepEqual(destroys("sed -i s/a/b/ f"), []);
    assert.deepEqual(destroys("sed '/x/d' f"), [], "without -i the file is left alone");
    assert.deepEqual(destroys("sed -in s/a/b/ f"), [], "-in is -i with the suffix n");
  });
});

describe("output-file programs and lines that feed a file back", () => {
  const of = (line: string) => analyzeCommand(line);
  it("sort -o, shuf -o and uniq IN OUT copy their inputs onto the output file", () => {
    assert.deepEqual(of("sort -o f /dev/null").copySources, [
      { from: ["/dev/null"], to: "f", missingEmpties: false },
    ]);
    assert.deepEqual(of("sort -of a b").copySources[0]?.from, ["a", "b"]);
    assert.deepEqual(of("sort -k 2 -o f a").copySources[0]?.from, ["a"], "-k takes a value");
    assert.deepEqual(of("sort -n -o f a").copySources[0]?.to, "f", "sort's -n takes none");
    assert.deepEqual(of("sort -uo f /dev/null").copySources[0]?.to, "f");
    assert.deepEqual(of("iconv -f utf8 -t latin1 -o f /dev/null").copySources[0]?.to, "f");
    assert.deepEqual(of("xxd -r /dev/null f").copySources[0]?.to, "f");
    assert.deepEqual(of("xxd -o 4 a").copySources, [], "xxd's -o is an offset");
    assert.deepEqual(of("sort --output=f < /dev/null").copySources[0]?.from, ["/dev/null"]);
    assert.deepEqual(of("uniq /dev/null f").copySources, [
      { from: ["/dev/null"], to: "f", missingEmpties: false },
    ]);
    assert.deepEqual(of("uniq -f 1 a").copySources, [], "one operand writes to stdout");
    assert.deepEqual(of("shuf -o f a").copySources[0]?.to, "f");
    assert.deepEqual(of("sort -o /dev/stdout a").copySources, []);
    assert.deepEqual(of("cat a | sort -o f").copySources, [], "piped input is content");
  });
  it("shuf -n 0, shuf -e with no lines and sort -o with no input write nothing", () => {
    assert.match(destroys("shuf -n0 -o f f").join(), /-n 0/);
    assert.match(destroys("shuf -n 0 -o f f").join(), /-n 0/);
    assert.match(destroys("shuf --head-count=0 -o f a").join(), /-n 0/);
    assert.match(destroys("shuf -e -o f").join(), /-e with no lines/);
    assert.deepEqual(destroys("shuf -e a b -o f"), []);
    assert.deepEqual(destroys("shuf -i 1-5 -o f"), [], "a range is content");
    assert.match(destroys("sort -o f").join(), /reads no input/);
  });
  it("marks a copy source an earlier command of the line wrote", () => {
    assert.deepEqual(of(": > e; cp e f").copySources[0]?.made, ["e"]);
    assert.deepEqual(of("touch x; cp e f").copySources[0]?.made, undefined);
    assert.deepEqual(of("cp f /tmp/n && grep -v k /tmp/n > f").copySources.at(-1), {
      from: ["/tmp/n"],
      to: "f",
      missingEmpties: false,
      made: ["/tmp/n"],
    });
    assert.deepEqual(
      of("cat a > f").copySources[0]?.made,
      undefined,
      "f is the target, not a source",
    );
  });
  it("lists workspace files a redirection fills with output the line does not show", () => {
    assert.deepEqual(of("awk 'BEGIN{}' > f").replaced, [{ program: "awk", to: "f" }]);
    assert.deepEqual(of("{ a; b; } > f").replaced, [{ program: "{ … }", to: "f" }]);
    assert.deepEqual(of("cmd 2> err.txt").replaced, [{ program: "cmd", to: "err.txt" }]);
    assert.deepEqual(
      of("cd sub && jq . x > y").replaced.map((r) => r.to),
      ["y", "sub/y"],
    );
    for (const line of [
      "echo hi > f",
      "printf 'x\\n' > f",
      "cat <<EOF > f\nx\nEOF",
      "go test ./... > /tmp/out.txt 2>&1",
      "cmd >> f",
      "cmd > /dev/null",
      "cat a > f",
    ])
      assert.deepEqual(of(line).replaced, [], line);
  });
});
