/**
 * Shells and interpreters for the analysis: inline code (`sh -c`, `python -c`, `node -e`,
 * `perl -ne`…) is dynamic; a program file (`sh s.sh`, `python x.py`, `node --test t.js`,
 * `java -jar x.jar`, `sh < s.sh`) is reported as a script so the kernel can check whether the
 * run wrote it; a program read from a pipe, a here-document or a here-string is dynamic.
 * Pure; reports through `Effects`.
 */
import type { Effects, Family, Invocation } from "./command-effects.ts";
import { type OptionSpec, scanOptions } from "./option-scan.ts";
import type { ShellWord } from "./shell-syntax.ts";

export const SHELLS = new Set(
  "sh bash dash zsh ash ksh mksh pdksh yash posh rbash fish csh tcsh hush".split(" "),
);

function shell(inv: Invocation, fx: Effects): void {
  const scan = scanOptions(inv.args, {
    flags: "-e -x -u -v -n -f -a -b -h -m -C -l -p -r -s -i -E -T -P -B -H -k -t".split(" "),
    values: ["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
    codeLetters: "c",
    flagPrefixes: ["--"],
    plusOptions: true,
  });
  for (const v of scan.values)
    if ((v.option === "--rcfile" || v.option === "--init-file") && v.word !== undefined)
      fx.script(v.word);
  const stdinMode = inv.args.some((a) => /^-[a-z]*s/.test(a.text) && !a.text.startsWith("--"));
  if (scan.code !== undefined) {
    const code = scan.code.word ?? inv.args[scan.operand];
    fx.dynamic(`${inv.name} -c`);
    fx.code(code?.text ?? "");
    return;
  }
  const file = inv.args[scan.operand];
  if (file !== undefined && !stdinMode && file.text !== "-") fx.script(file);
  else stdinScript(inv, fx);
}

/** An interpreter reading its program from standard input. */
function stdinScript(inv: Invocation, fx: Effects): void {
  if (inv.stdin === "file" && inv.stdinFile !== undefined) fx.script(inv.stdinFile);
  else if (inv.stdin !== undefined) fx.dynamic(`${inv.stdin} into ${inv.name}`);
}

/** An interpreter spec: its inline-code options, options with values, module options. */
type ModuleRunner = (w: ShellWord, rest: readonly ShellWord[], fx: Effects) => void;

function interpreter(spec: OptionSpec, modules?: ModuleRunner): Family {
  return (inv, fx) => {
    let from = 0;
    // An unknown option right before the first operand may take it as its value: then the
    // script is further on. Both are reported (a few rounds at most).
    for (let round = 0; round < 4; round++) {
      const scan = scanOptions(inv.args, spec, from);
      if (scan.code !== undefined) {
        fx.dynamic(`${inv.name} ${scan.code.option} runs inline code`);
        return;
      }
      if (scan.module !== undefined) {
        const word = scan.module.word;
        if (word !== undefined && modules !== undefined)
          modules(word, inv.args.slice(scan.operand), fx);
        return;
      }
      const file = inv.args[scan.operand];
      if (file === undefined || file.text === "-") {
        if (round === 0) stdinScript(inv, fx);
        return;
      }
      fx.script(file);
      const before = inv.args[scan.operand - 1]?.text ?? "";
      if (!scan.unknown.includes(before) || before.includes("=")) return;
      from = scan.operand + 1;
    }
  };
}

/** python -m pkg.mod runs pkg/mod.py (or its __main__) from the working directory first. */
function pythonModule(w: ShellWord, rest: readonly ShellWord[], fx: Effects): void {
  const path = w.text.replace(/\./g, "/");
  if (!/^[A-Za-z0-9_/]+$/.test(path)) {
    fx.dynamic(`python -m ${w.text}`);
    return;
  }
  // python -m pip install …, python -m pytest: judged as the tool itself too.
  fx.run([w, ...rest], undefined);
  const parent = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  fx.scriptFiles(undefined, [
    `${path}.py`,
    `${path}/__main__.py`,
    `${path}/__init__.py`,
    ...(parent === "" ? [] : [`${parent}/__init__.py`]),
  ]);
}

const python = interpreter(
  {
    flags: "-b -bb -B -d -E -h -i -I -O -OO -P -q -s -S -u -v -V -x -3 --version --help".split(" "),
    values: ["-W", "-X", "--check-hash-based-pycs"],
    code: ["-c"],
    module: ["-m"],
  },
  pythonModule,
);

function node(inv: Invocation, fx: Effects): void {
  const spec: OptionSpec = {
    code: ["-e", "--eval", "-p", "--print"],
    values: ["-r", "--require", "--import", "--loader", "--experimental-loader", "-C"]
      .concat(["--conditions", "--input-type", "--title", "--env-file", "--inspect-port"])
      .concat(["--test-reporter", "--test-reporter-destination", "--test-name-pattern"])
      .concat(["--test-concurrency", "--watch-path", "--stack-size", "--run"]),
    flags: ["--test", "--watch", "--check", "-c", "--no-warnings", "--enable-source-maps"].concat([
      "-v",
      "--version",
      "-h",
      "--help",
      "-i",
      "--interactive",
    ]),
    flagPrefixes: ["--experimental-", "--no-", "--trace-", "--max-", "--inspect", "--test-"],
  };
  const scan = scanOptions(inv.args, spec);
  if (scan.code !== undefined) {
    fx.dynamic(`${inv.name} ${scan.code.option} runs inline code`);
    return;
  }
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  for (const v of scan.values) {
    if (v.option === "--run") fx.scriptFiles(undefined, ["package.json"]);
    // A reporter given as a path is a module node loads (a name is a built-in or a package).
    const loads = ["-r", "--require", "--import", "--loader", "--experimental-loader"].concat([
      "--test-reporter",
    ]);
    if (loads.includes(v.option) && v.word !== undefined && /^[./]/.test(v.word.text))
      fx.script(v.word);
  }
  const testMode = inv.args.some((a) => a.text === "--test");
  const operands = inv.args.slice(scan.operand);
  if (testMode) {
    for (const w of operands) fx.script(w);
  } else if (operands[0] !== undefined && operands[0].text !== "-") fx.script(operands[0]);
  else if (!inv.args.some((a) => a.text === "--run")) stdinScript(inv, fx);
}

const perlInterpreter = interpreter({
  codeLetters: "eE",
  flags: "-w -W -X -n -p -a -l -s -t -T -U -c -d -D -i -0 -C -S -u -v -x".split(" "),
  flagPrefixes: ["-M", "-m", "-I", "-l", "-0", "-i", "-C", "-d", "-D", "-x"],
});

/** perl: -e/-E (also in clusters: -ne, -lane) is inline code; so is -M with more than a module name. */
function perl(inv: Invocation, fx: Effects): void {
  const m = inv.args.find((a) => /^-[Mm]/.test(a.text) && /[^\w:=,-]/.test(a.text.slice(2)));
  if (m !== undefined) fx.dynamic(`perl ${m.text.slice(0, 2)} with code`);
  perlInterpreter(inv, fx);
}

const INTERPRETERS = new Map<string, Family>([
  ...[...SHELLS].map((n): [string, Family] => [n, shell]),
  ["node", node],
  ["nodejs", node],
  ["perl", perl],
  [
    "ruby",
    interpreter({
      code: ["-e"],
      codeLetters: "e",
      values: ["-r", "-I", "-E", "--encoding"],
      flags: "-w -W -n -p -a -l -s -c -d -v -y -x -0 -C --verbose --disable-gems".split(" "),
    }),
  ],
  [
    "php",
    interpreter(
      {
        code: ["-r", "-B", "-R", "-E", "-F", "-d"],
        values: ["-c", "-t", "-z"],
        flags: ["-n", "-q", "-H", "-a", "-l", "-s", "-w", "-e", "-i", "-v", "-m"],
        module: ["-f"],
      },
      (w, _rest, fx) => fx.script(w),
    ),
  ],
  ["lua", interpreter({ code: ["-e"], values: ["-l"], flags: ["-i", "-v", "-E", "-W"] })],
  [
    "luajit",
    interpreter({ code: ["-e"], values: ["-l", "-j", "-O", "-b"], flags: ["-i", "-v", "-E"] }),
  ],
  ["Rscript", interpreter({ code: ["-e"], flagPrefixes: ["--"] })],
  [
    "julia",
    interpreter({
      code: ["-e", "-E", "--eval", "--print"],
      values: ["-L", "--load", "-J", "-p", "-t"],
      flagPrefixes: ["--"],
    }),
  ],
  [
    "java",
    interpreter(
      {
        values: ["-cp", "-classpath", "--class-path", "-p", "--module-path", "--add-modules"],
        flagPrefixes: ["-D", "-X", "-ea", "-da", "-verbose", "--enable-preview", "-server"],
        module: ["-jar"],
      },
      (w, _rest, fx) => fx.script(w),
    ),
  ],
  ["tclsh", interpreter({})],
  ["wish", interpreter({})],
  ["osascript", interpreter({ code: ["-e"], values: ["-l"] })],
  [
    "pwsh",
    interpreter(
      { code: ["-c", "-Command", "-command", "-EncodedCommand", "-e"], module: ["-File", "-f"] },
      (w, _rest, fx) => fx.script(w),
    ),
  ],
  ["tsx", interpreter({ code: ["-e", "--eval", "-p", "--print"], flagPrefixes: ["--"] })],
  [
    "ts-node",
    interpreter({
      code: ["-e", "--eval", "-p", "--print"],
      values: ["-r", "--require", "-P", "--project"],
      flagPrefixes: ["--"],
    }),
  ],
  ["esno", interpreter({ flagPrefixes: ["--"] })],
  ["vite-node", interpreter({ flagPrefixes: ["--"] })],
]);

/** The shell or interpreter family of `name` (python3.12 included), if it is one. */
export function interpreterFamily(name: string): Family | undefined {
  if (/^python[0-9.]*$|^pypy[0-9.]*$/.test(name)) return python;
  return INTERPRETERS.get(name);
}
