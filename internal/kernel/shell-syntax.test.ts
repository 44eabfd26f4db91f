/** The sh reader: separators, quoting, comments, here-documents, substitutions, problems. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseShell } from "./shell-syntax.ts";

const names = (line: string): string[][] =>
  parseShell(line).commands.map((c) => c.words.map((w) => w.text));

describe("parseShell", () => {
  it("marks the redirections of a compound command", () => {
    const groups = (line: string) =>
      parseShell(line).commands.map((c) => [c.words.length, c.group === true]);
    for (const line of [
      "{ :; } > f",
      "(true) > f",
      "for a in b; do :; done > f",
      "if :; then :; fi > f",
    ])
      assert.deepEqual(groups(line).at(-1), [0, true], line);
    assert.deepEqual(groups("> f"), [[0, false]]);
    assert.deepEqual(groups("(ls); > f").at(-1), [0, false]);
  });
  it("splits commands on every separator sh knows, newlines included", () => {
    assert.deepEqual(names("a|b&&c||d;e&f\ng"), [["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"]]);
    assert.deepEqual(names("ls\trm x"), [["ls", "rm", "x"]], "a tab separates words only");
    assert.deepEqual(names("(a) ; { b; }"), [["a"], ["b"]]);
  });
  it("removes quotes the way sh does", () => {
    assert.deepEqual(names(`r''m "a b" 'c'd \\e "\\$x" ab"c"`), [
      ["rm", "a b", "cd", "e", "$x", "abc"],
    ]);
    assert.deepEqual(names("rm \\\nx"), [["rm", "x"]], "backslash-newline continues the line");
  });
  it("ends a comment at the newline, not at the end of the line", () => {
    assert.deepEqual(names("ls # note; rm x\nrm y"), [["ls"], ["rm", "y"]]);
    assert.deepEqual(names("echo a#b"), [["echo", "a#b"]]);
  });
  it("skips here-document bodies exactly, and sees what follows them", () => {
    assert.deepEqual(names("cat <<EOF\nrm a\nEOF\nrm b"), [["cat"], ["rm", "b"]]);
    assert.deepEqual(names("cat <<-'E'\n\trm a\n\tE\nrm b"), [["cat"], ["rm", "b"]]);
    assert.deepEqual(names("cat <<A <<B\n1\nA\n2\nB\nrm c"), [["cat"], ["rm", "c"]]);
    const p = parseShell("cat <<E\n$(rm x)\nE");
    assert.deepEqual(p.nested, ["$(rm x)"]);
    assert.ok(p.problems.includes("substitution in a here-document"));
    assert.deepEqual(parseShell("cat <<'E'\n$(rm x)\nE").nested, []);
  });
  it("parses substitutions into commands of their own", () => {
    assert.deepEqual(names("echo $(a $(b)) `c`"), [
      ["b"],
      ["a", "$(b)"],
      ["c"],
      ["echo", "$(a $(b))", "`c`"],
    ]);
    assert.deepEqual(names("cat <(d) >(e)").slice(0, 2), [["d"], ["e"]]);
  });
  it("marks expansions, globs, braces and ~ on words", () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, not a template literal
    const [cmd] = parseShell("x $A ${B} $((1)) $'\\x72' *.ts {a,b} ~/x [g]it $? \"$C\"").commands;
    const w = cmd?.words ?? [];
    assert.deepEqual(w[1]?.expansions, ["parameter $A"]);
    assert.match(w[2]?.expansions[0] ?? "", /parameter \$\{B\}/);
    assert.match(w[3]?.expansions[0] ?? "", /arithmetic/);
    assert.equal(w[4]?.text, "r");
    assert.match(w[4]?.expansions[0] ?? "", /\$'…'/);
    assert.equal(w[5]?.glob, true);
    assert.equal(w[6]?.brace, true);
    assert.equal(w[7]?.tilde, true);
    assert.equal(w[8]?.glob, true);
    assert.deepEqual(w[9]?.expansions, [], "$? is a number");
    assert.deepEqual(w[10]?.expansions, ["parameter $C"], "quotes do not hide a variable");
    const [q] = parseShell("x '*' \"?\" \\*").commands;
    assert.ok(
      q?.words.slice(1).every((x) => !x.glob),
      "quoted glob characters are literal",
    );
  });
  it("keeps $ENV.NAME placeholders literal", () => {
    const [c] = parseShell("echo $ENV.TOKEN").commands;
    assert.deepEqual(c?.words[1]?.expansions, []);
    assert.equal(c?.words[1]?.text, "$ENV.TOKEN");
  });
  it("reads assignments, redirections and where stdin comes from", () => {
    const [c] = parseShell("A=1 B='x y' cmd 2>/dev/null >out <in").commands;
    assert.deepEqual(
      c?.assignments.map((a) => a.text),
      ["A=1", "B=x y"],
    );
    assert.deepEqual(
      c?.redirects.map((r) => `${r.fd ?? ""}${r.op}${r.target.text}`),
      ["2>/dev/null", ">out", "<in"],
    );
    assert.equal(c?.stdin, "file");
    assert.equal(parseShell("a | sh").commands[1]?.stdin, "pipe");
    assert.equal(parseShell("sh <<< x").commands[0]?.stdin, "herestring");
    assert.equal(parseShell("sh <<E\nx\nE").commands[0]?.stdin, "heredoc");
  });
  it("reads compound commands: functions, if, case", () => {
    assert.deepEqual(names("f() { rm x; }; f"), [["rm", "x"], ["f"]]);
    assert.deepEqual(names("function g { rm y; }"), [["rm", "y"]]);
    assert.deepEqual(names("if a; then b; elif c; then d; else e; fi"), [
      ["a"],
      ["b"],
      ["c"],
      ["d"],
      ["e"],
    ]);
    assert.deepEqual(names("case $x in a|b) rm q;; *) ls;; esac; z"), [
      ["case", "$x", "in"],
      ["rm", "q"],
      ["ls"],
      ["z"],
    ]);
    assert.deepEqual(
      names('"case" x in\nrm z'),
      [
        ["case", "x", "in"],
        ["rm", "z"],
      ],
      "a quoted case is a command",
    );
  });
  it("reports what it does not follow", () => {
    const problems = (l: string) => parseShell(l).problems;
    assert.ok(problems("echo 'x").includes("unterminated '"));
    assert.ok(problems('echo "x').includes('unterminated "'));
    assert.ok(problems("echo $(x").includes("unterminated $(…)"));
    assert.ok(problems("a )").includes("unbalanced )"));
    assert.ok(problems("a ;; b").some((p) => /outside case/.test(p)));
    assert.ok(problems("case x in\nrm -rf z\nesac").some((p) => /case pattern/.test(p)));
    assert.ok(problems("((x=1))").some((p) => /arithmetic/.test(p)));
    assert.ok(problems("[[ -f x ]]").some((p) => /bash/.test(p)));
    assert.ok(problems("$(".repeat(100)).includes("nesting too deep"));
    assert.ok(problems("ls >").some((p) => /without a target/.test(p)));
  });
  it("never throws", () => {
    for (const s of [
      "",
      "\\",
      "$",
      "${",
      "$((",
      "`",
      "<<",
      "<<<",
      "&>",
      "'",
      '"',
      "(",
      ")",
      "{",
      "\u0000",
      "\ud800",
    ])
      assert.ok(parseShell(s));
  });
});
