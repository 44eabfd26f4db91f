/**
 * Build and package tools for the analysis: which files decide what they run (make: the
 * Makefile; npm/yarn/pnpm/bun: package.json and their rc files; cargo: Cargo.toml and
 * build.rs …), which forms run inline or downloaded code (make --eval, npm exec -c, npx -c,
 * pnpm dlx, deno eval), and which options could point them at another program (npm
 * --script-shell=…, make CC=…). The files are reported as scripts: the kernel asks a person
 * when the run itself wrote or changed one of them. Pure.
 */
import type { Effects, Family, Invocation } from "./command-effects.ts";
import { insideWorkspace } from "./inside-workspace.ts";
import { scanOptions } from "./option-scan.ts";
import type { ShellWord } from "./shell-syntax.ts";

const NPM_FILES = ["package.json", ".npmrc"];
const YARN_FILES = ["package.json", ".npmrc", ".yarnrc.yml", ".yarnrc", ".pnp.cjs"];
const MAKEFILES = ["GNUmakefile", "makefile", "Makefile"];

/** Tools whose run is decided by fixed files in their directory. */
const BUILD_FILES: Record<string, string[]> = {
  cargo: ["Cargo.toml", "build.rs", ".cargo/config.toml", ".cargo/config"],
  gradle: ["build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts"],
  mvn: ["pom.xml", ".mvn/maven.config", ".mvn/jvm.config"],
  rake: ["Rakefile", "rakefile", "Rakefile.rb"],
  just: ["justfile", "Justfile", ".justfile"],
  tox: ["tox.ini", "setup.cfg", "pyproject.toml"],
  pytest: ["conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"],
  "py.test": ["conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"],
  ninja: ["build.ninja"],
  cmake: ["CMakeLists.txt"],
  composer: ["composer.json"],
  bundle: ["Gemfile"],
};

/** npm options that cannot change which program runs (the others can set any config key). */
const NPM_SAFE =
  /^(-s|--silent|-q|--quiet|-d{1,3}|--verbose|--json|--if-present|--ignore-scripts|--no-color|--color(=.*)?|--loglevel(=.*)?|--workspaces|--ws|-ws|--include-workspace-root|--no-audit|--no-fund|--prefer-offline|--offline|--no-progress|--workspace=.*|--prefix=.*|--dry-run|--production|--omit=.*|--include=.*|--save-dev|-D|--save|-S|--save-exact|-E|--no-save|--legacy-peer-deps|--force|-f|--yes|-y|--long|-l|--all|-a|--depth=.*|--parseable|-p|--global|-g)$/;
const NPM_VALUES = new Set([
  "-w",
  "--workspace",
  "--prefix",
  "--loglevel",
  "--depth",
  "--omit",
  "--include",
]);
const NPM_RUNS = new Set(
  (
    "test t tst start stop restart run run-script rum urn exec x explore rebuild rb install i in " +
    "ins inst add ci clean-install install-test it install-ci-test cit pack publish version " +
    "update up upgrade uninstall remove rm un unlink link ln dedupe prune"
  ).split(" "),
);

function word(text: string): ShellWord {
  return {
    text,
    pattern: text,
    glob: false,
    brace: false,
    tilde: false,
    expansions: [],
    quoted: true,
  };
}

/**
 * npm's operands before "--" (npm permutes options, so they may come anywhere) and the
 * words after it; an option that is not known to be harmless makes the line dynamic.
 */
function npmLike(
  inv: Invocation,
  fx: Effects,
): { positional: ShellWord[]; after: readonly ShellWord[] } {
  const positional: ShellWord[] = [];
  for (let i = 0; i < inv.args.length; i++) {
    const w = inv.args[i] as ShellWord;
    if (w.text === "--") return { positional, after: inv.args.slice(i + 1) };
    if (!w.text.startsWith("-")) positional.push(w);
    else if (NPM_VALUES.has(w.text)) i++;
    else if (!NPM_SAFE.test(w.text))
      fx.dynamic(`${inv.name} option ${w.text} can change what it runs`);
  }
  return { positional, after: [] };
}

/** npm subcommands that rewrite package.json (`pkg set`, `init -y`, `version`…). */
const NPM_EDITS_MANIFEST = new Set(["pkg", "init", "innit", "create", "version", "set-script"]);

/** `package.json` in the `--prefix` directory (or the command's own), as a literal word. */
function manifestWord(prefix: ShellWord | undefined): ShellWord {
  if (prefix === undefined) return word("package.json");
  const w = word(`${prefix.text.replace(/\/+$/, "")}/package.json`);
  return { ...w, expansions: [...prefix.expansions] };
}

function npm(inv: Invocation, fx: Effects): void {
  const prefix = prefixDir(inv.args, ["--prefix", "-C"]);
  const { positional: pos, after } = npmLike(inv, fx);
  const sub = pos[0]?.text;
  if (sub === undefined) return;
  if (sub === "config" || sub === "c" || sub === "set") {
    if (pos[1]?.text !== "get" && pos[1]?.text !== "list" && pos[1]?.text !== "ls")
      fx.dynamic("npm config can set the program npm runs scripts with");
  }
  if ((sub === "init" || sub === "create" || sub === "innit") && pos[1] !== undefined)
    fx.dynamic(`npm ${sub} ${pos[1].text} downloads and runs an initializer`);
  // They rewrite the manifest itself (a build file: touchesBuild asks).
  if (NPM_EDITS_MANIFEST.has(sub)) fx.write(manifestWord(prefix));
  if (NPM_RUNS.has(sub)) fx.scriptFiles(prefix, NPM_FILES);
  if (sub === "exec" || sub === "x") execBin(inv, fx, pos.length > 1 ? pos.slice(1) : after);
  if (!["test", "t", "tst", "start", "run", "run-script", "ls", "view", "help"].includes(sub))
    fx.writer();
}

/** npx X / npm exec X: runs node_modules/.bin/X (or a downloaded package) with arguments. */
function execBin(inv: Invocation, fx: Effects, pos: readonly ShellWord[]): void {
  if (inv.args.some((a) => /^(-c|--call)(=|$)/.test(a.text))) {
    fx.dynamic(`${inv.name} -c runs a command line`);
    return;
  }
  const bin = pos[0];
  if (bin === undefined) return;
  if (/^[A-Za-z0-9._-]+$/.test(bin.text))
    fx.scriptFiles(undefined, [`node_modules/.bin/${bin.text}`]);
  const k = inv.args.indexOf(bin);
  fx.run(inv.args.slice(Math.max(k, 0)), inv.stdin);
}

function npx(inv: Invocation, fx: Effects): void {
  const scan = scanOptions(inv.args, {
    flags: [
      "-y",
      "--yes",
      "--no",
      "-q",
      "--quiet",
      "--no-install",
      "--prefer-offline",
      "--ignore-existing",
    ],
    values: ["-p", "--package"],
    code: ["-c", "--call"],
  });
  if (scan.code !== undefined) {
    fx.dynamic(`${inv.name} -c runs a command line`);
    return;
  }
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  fx.scriptFiles(undefined, NPM_FILES);
  execBin(inv, fx, inv.args.slice(scan.operand));
}

function yarnOrPnpm(inv: Invocation, fx: Effects): void {
  const pnpm = inv.name === "pnpm";
  const dir = prefixDir(inv.args, ["--cwd", "-C", "--dir"]);
  const scan = scanOptions(inv.args, {
    flags: [
      "-s",
      "--silent",
      "--verbose",
      "-r",
      "--recursive",
      "-w",
      "--workspace-root",
      "--if-present",
    ].concat(["--parallel", "--stream", "--aggregate-output", "--frozen-lockfile", "--offline"]),
    values: ["--cwd", "-C", "--dir", "--filter", "-F", "--reporter", "--workspace-concurrency"],
    code: pnpm ? ["-c", "--shell-mode"] : [],
  });
  if (scan.code !== undefined) fx.dynamic(`${inv.name} ${scan.code.option} runs a command line`);
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  const sub = inv.args[scan.operand];
  const rest = inv.args.slice(scan.operand + 1);
  fx.scriptFiles(dir, pnpm ? NPM_FILES : YARN_FILES);
  const name = sub?.text ?? "install";
  if (name === "dlx" || name === "create")
    fx.dynamic(`${inv.name} ${name} downloads and runs a package`);
  else if (name === "config" && rest[0]?.text !== "get" && rest[0]?.text !== "list")
    fx.dynamic(`${inv.name} config can set the program scripts run with`);
  else if (name === "exec") fx.run(rest, inv.stdin);
  else if (name === "node") fx.run([word("node"), ...rest], inv.stdin);
  else if (name === "run" && rest[0] !== undefined) fx.run(rest, inv.stdin);
  else if (!YARN_BUILTINS.has(name) && sub !== undefined) fx.run([sub, ...rest], inv.stdin);
  if (!["test", "run", "start", "list", "ls", "info", "why"].includes(name)) fx.writer();
}

const YARN_BUILTINS = new Set(
  (
    "add install remove up upgrade update init config dlx exec node run test start info list ls " +
    "why outdated audit publish pack version link unlink cache bin workspaces workspace set " +
    "plugin constraints dedupe import licenses login logout owner tag team global help"
  ).split(" "),
);

const BUN_BUILTINS = new Set(
  "test install add build pm i remove rm update upgrade outdated init link unlink publish".split(
    " ",
  ),
);

function bun(inv: Invocation, fx: Effects): void {
  if (inv.name === "bunx") {
    npx(inv, fx);
    return;
  }
  if (inv.args.some((a) => /^(-e|--eval|-p|--print)(=|$)/.test(a.text))) {
    fx.dynamic("bun --eval runs inline code");
    return;
  }
  const scan = scanOptions(inv.args, { flagPrefixes: ["--"], flags: ["-b", "--bun"] });
  const sub = inv.args[scan.operand];
  const rest = inv.args.slice(scan.operand + 1);
  if (sub === undefined) return;
  if (sub.text === "x") {
    npx({ ...inv, args: rest }, fx);
    return;
  }
  if (sub.text === "create" || sub.text === "repl") fx.dynamic(`bun ${sub.text}`);
  fx.scriptFiles(undefined, NPM_FILES);
  if (BUN_BUILTINS.has(sub.text)) return;
  const target = sub.text === "run" ? rest[0] : sub;
  if (target === undefined) return;
  if (/[./]/.test(target.text)) fx.script(target);
  else fx.run(sub.text === "run" ? rest : [sub, ...rest], inv.stdin);
}

function deno(inv: Invocation, fx: Effects): void {
  const sub = inv.args[0];
  if (sub === undefined) return;
  const rest = inv.args.slice(1);
  if (sub.text === "eval" || sub.text === "repl") fx.dynamic(`deno ${sub.text}`);
  else if (sub.text === "task")
    fx.scriptFiles(undefined, ["deno.json", "deno.jsonc", "package.json"]);
  else if (sub.text === "run" || /\.[cm]?[jt]sx?$/.test(sub.text)) {
    const args = sub.text === "run" ? rest : inv.args;
    const scan = scanOptions(args, {
      flagPrefixes: [
        "--allow-",
        "--deny-",
        "--unstable",
        "--no-",
        "--check",
        "--watch",
        "--reload",
        "--inspect",
      ],
      flags: ["-A", "-q", "--quiet", "-r", "--cached-only"],
      values: [
        "-c",
        "--config",
        "--import-map",
        "--env-file",
        "--location",
        "--seed",
        "--lock",
        "--cert",
      ],
    });
    for (const u of scan.unknown) fx.dynamic(`deno option ${u} the analysis does not know`);
    const file = args[scan.operand];
    if (file !== undefined) fx.script(file);
  }
}

function make(inv: Invocation, fx: Effects): void {
  const dir = prefixDir(inv.args, ["-C", "--directory"]);
  for (const w of inv.args) {
    const a = w.text;
    if (/^(-f|--file|--makefile)(=|$)|^-f./.test(a))
      fx.dynamic("make -f reads a makefile the line names");
    if (/^(--eval|-E)(=|$)|^-E./.test(a)) fx.dynamic("make --eval runs inline make code");
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(a);
    // A variable on the command line overrides the makefile's (CC=…, SHELL=…).
    if (m !== null && !/^(\d+|true|false|yes|no|on|off|)$/i.test(m[2] as string))
      fx.dynamic(`make ${m[1]}=…: a variable can replace the commands make runs`);
  }
  fx.scriptFiles(dir, MAKEFILES);
}

function goTool(inv: Invocation, fx: Effects): void {
  const sub = inv.args[0]?.text;
  const rest = inv.args.slice(1);
  if (rest.some((a) => /^-(exec|toolexec)(=|$)/.test(a.text)))
    fx.dynamic(`go ${sub} -exec runs a program`);
  if (sub === "generate") fx.dynamic("go generate runs the commands in //go:generate comments");
  if (sub === "env" && rest.some((a) => a.text === "-w")) fx.dynamic("go env -w");
  if (sub === "run") for (const w of rest) if (w.text.endsWith(".go")) fx.script(w);
  if (sub !== undefined && ["run", "test", "build", "generate", "install"].includes(sub))
    fx.scriptFiles(undefined, ["go.mod", "go.work"]);
  if (sub !== "test" && sub !== "vet" && sub !== "run") fx.writer();
}

/** Wrapper scripts that run the tool of the same project. */
const ALIASES: Record<string, string> = { gradlew: "gradle", mvnw: "mvn" };

function fixedFiles(inv: Invocation, fx: Effects): void {
  const files = BUILD_FILES[ALIASES[inv.name] ?? inv.name] ?? [];
  if (inv.name === "cargo" && inv.args.some((a) => /^--config(=|$)/.test(a.text)))
    fx.dynamic("cargo --config can set the program cargo runs");
  if (inv.name === "cargo") {
    // The manifest it names decides what builds and runs (its build.rs), not the workspace's.
    const manifest = prefixDir(inv.args, ["--manifest-path"]);
    if (manifest !== undefined && !insideWorkspace(manifest))
      fx.dynamic(
        `cargo --manifest-path ${manifest.text.slice(0, 80)}: a project outside the workspace`,
      );
    else if (manifest !== undefined) fx.script(manifest);
  }
  if (inv.name === "cmake") {
    const p = inv.args.findIndex((a) => a.text === "-P");
    const script = inv.args[p + 1];
    if (p >= 0 && script !== undefined) fx.script(script);
  }
  if (inv.name === "bundle" && inv.args[0]?.text === "exec") fx.run(inv.args.slice(1), inv.stdin);
  if ((inv.name === "pytest" || inv.name === "py.test") && inv.args.some((a) => a.text === "-p"))
    fx.dynamic("pytest -p loads a plugin");
  const tool = ALIASES[inv.name] ?? inv.name;
  // Scripts and settings files named on the line decide what runs, not the project's own.
  if (
    tool === "gradle" &&
    inv.args.some((a) =>
      /^(-I|--init-script|-b|--build-file|-c|--settings-file)(=|$)|^-I./.test(a.text),
    )
  )
    fx.dynamic("gradle -I/-b/-c: a script or settings file of the line's choosing runs");
  if (
    tool === "mvn" &&
    inv.args.some((a) => /^(-f|--file|-s|--settings|-gs|--global-settings)(=|$)/.test(a.text))
  )
    fx.dynamic("mvn -f/-s: a project or settings file of the line's choosing");
  fx.scriptFiles(undefined, files);
  fx.writer();
}

/** A directory option (-C DIR, --prefix=DIR), or undefined for the command's own. */
function prefixDir(args: readonly ShellWord[], options: string[]): ShellWord | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = (args[i] as ShellWord).text;
    if (options.includes(a)) return args[i + 1];
    const o = options.find(
      (x) => a.startsWith(`${x}=`) || (x.length === 2 && a.startsWith(x) && a.length > 2),
    );
    if (o !== undefined) return word(a.slice(a.startsWith(`${o}=`) ? o.length + 1 : o.length));
  }
  return undefined;
}

const FAMILY: Record<string, Family> = {
  make,
  gmake: make,
  npm,
  npx,
  pnpx: npx,
  pnpm: yarnOrPnpm,
  yarn: yarnOrPnpm,
  bun,
  bunx: bun,
  deno,
  go: goTool,
  gradlew: fixedFiles,
  mvnw: fixedFiles,
  ...Object.fromEntries(Object.keys(BUILD_FILES).map((n) => [n, fixedFiles])),
};

/** The build tools' names and their family. */
export const buildTool = {
  names: Object.keys(FAMILY),
  family: ((inv, fx) => (FAMILY[inv.name] as Family)(inv, fx)) as Family,
};
