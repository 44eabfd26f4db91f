/** awk programs and sed scripts: plain text filtering vs running commands and files. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { awkProgramRisk, sedDeletes, sedScriptRisk } from "./program-text.ts";

describe("awkProgramRisk", () => {
  it("lets plain programs through", () => {
    for (const p of [
      "{print $1}",
      "/a|b/ {print}",
      "$3 > 10 {print}",
      "NR==1 || NR==5",
      'BEGIN{FS=":"} {s+=$2} END{print s}',
      '{print "a|b>c"}',
      '{ printf "%d\\n", $1 }',
      "length($0) > 72",
    ])
      assert.equal(awkProgramRisk(p), undefined, p);
  });
  it("flags commands, pipes, getline, file output and extensions", () => {
    const cases: [string, RegExp][] = [
      ['BEGIN{system("id")}', /system/],
      ["BEGIN { system (x) }", /system/],
      ['{print | "sh"}', /pipe/],
      ['{ "date" | getline d }', /getline/],
      ['BEGIN{while((getline l < ".env")>0) print l}', /getline/],
      ['{print > "f"}', /redirection/],
      ['{printf "%s", $0 >> "log"}', /redirection/],
      ["{print $0 > $2}", /redirection/],
      ['BEGIN{c="id"; print | c}', /pipe/],
      ['@load "filefuncs"', /@load/],
      ['BEGIN { print |& "cat" }', /pipe/],
    ];
    for (const [p, why] of cases) assert.match(awkProgramRisk(p) ?? "", why, p);
  });
});

describe("sedScriptRisk", () => {
  it("lets plain editing through", () => {
    for (const s of [
      "1,20p",
      "s/a/b/",
      "s/a/b/g;s|x|y|2",
      "/start/,/end/d",
      "$!N;P;D",
      "y/abc/xyz/",
      ":a;N;$!ba;s/\\n/ /g",
      "1i hello; e not a command",
      "/x/{s/a/b/;p}",
      "s/[/]/x/",
      "\\,a,d",
      "l 5;q 3",
      "0~2d",
      "s/a\\/e/b/",
      "s/[/]e/x/",
      "s/[]/]/x/",
    ])
      assert.equal(sedScriptRisk(s), undefined, s);
  });
  it("flags commands, file writes and reads", () => {
    const cases: [string, RegExp][] = [
      ["s/a/b/e", /s\/\/\/e/],
      ["1e id", /sed e/],
      ["e", /sed e/],
      ["w out", /sed w/],
      ["s/x/y/w out", /s\/\/\/w/],
      ["s/x/y/gw out", /s\/\/\/w/],
      ["r .env", /sed r/],
      ["R x", /sed r/],
      ["1W x", /sed w/],
      ["/x/!e", /sed e/],
      ["s/a/b/;e id", /sed e/],
      ["s/a/b", /unterminated/],
      ["s/a/b/k", /flag/],
      ["s/[/]/x/e", /s\/\/\/e/],
      ["/[/]/e", /sed e/],
    ];
    for (const [s, why] of cases) assert.match(sedScriptRisk(s) ?? "", why, s);
  });
});

describe("sedDeletes", () => {
  it("finds every command that drops lines or their text", () => {
    for (const s of ["d", "1,$d", "$d", "/x/!d", "N;D", "1q", "2Q", "z", "c\\", "1c x", "s/.*//"])
      assert.equal(sedDeletes(s), true, s);
    for (const s of ["s/^.*$//", "s/\\(.*\\)//g", "{s/a/b/;d}", "e id", "s/a"])
      assert.equal(sedDeletes(s), true, `${s} (or unreadable)`);
  });
  it("leaves substitutions and printing alone", () => {
    for (const s of ["s/a/b/", "s/.*/x/", "s/a.*//", "p", "1,5p", "y/ab/cd/", "/x/s/a/b/g", "="])
      assert.equal(sedDeletes(s), false, s);
  });
});
