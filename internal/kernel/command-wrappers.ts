/**
 * Wrappers, for the analysis: programs that run another command given in their arguments
 * (env, command, exec, nice, timeout, xargs, flock, watch…), read by a spec of their options
 * so the wrapped command is found exactly (an option the spec does not know is dynamic), and
 * multi-call binaries, whose applet is the command (`busybox rm` is `rm`; an applet the
 * analysis does not know, or a shell, is dynamic). Pure; reports through `Effects`.
 */
import { type Effects, type Family, type Invocation, withPlaceholder } from "./command-effects.ts";
import { familyOf, READ_ONLY } from "./command-families.ts";
import { SHELLS } from "./interpreters.ts";
import { type OptionSpec, scanOptions } from "./option-scan.ts";
import type { ShellWord } from "./shell-syntax.ts";

/** Busybox/toybox applets the analysis knows besides the read-only ones (the others are dynamic). */
const MORE_APPLETS = new Set(
  (
    "rm rmdir unlink truncate shred dd cp mv ln chmod chown chgrp tee gzip gunzip zcat bzip2 " +
    "bunzip2 xz unxz tar unzip kill killall pkill install mktemp sync patch cpio"
  ).split(" "),
);

const WRAPPERS: Record<string, OptionSpec & { positionals?: number; runsCode?: boolean }> = {
  env: {
    flags: ["-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"],
    values: ["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
  },
  command: { flags: ["-p", "-v", "-V"] },
  builtin: {},
  exec: { flags: ["-c", "-l"], values: ["-a"] },
  nohup: {},
  setsid: { flags: ["-c", "-f", "-w", "--ctty", "--fork", "--wait"] },
  time: {
    flags: ["-p", "-v", "--verbose", "--portability", "-a", "--append", "-q", "--quiet"],
    values: ["-f", "--format", "-o", "--output"],
  },
  nice: { values: ["-n", "--adjustment"] },
  ionice: {
    flags: ["-t", "--ignore"],
    values: ["-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"],
  },
  stdbuf: { values: ["-i", "-o", "-e", "--input", "--output", "--error"] },
  timeout: {
    flags: ["--foreground", "--preserve-status", "-v", "--verbose"],
    values: ["-s", "--signal", "-k", "--kill-after"],
    positionals: 1,
  },
  xargs: {
    flags: [
      "-0",
      "--null",
      "-r",
      "--no-run-if-empty",
      "-t",
      "--verbose",
      "-p",
      "--interactive",
    ].concat(["-x", "--exit", "-o", "--open-tty", "--show-limits"]),
    values: ["-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines", "-n"].concat(
      ["--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"],
    ),
  },
  chronic: { flags: ["-e", "-v", "-d"] },
  unbuffer: { flags: ["-p"] },
  sudo: {
    flags: ["-E", "-H", "-n", "-S", "-b", "-i", "-s", "-k", "-K", "-l", "-v", "-P", "-A", "-B"],
    values: ["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"],
  },
  doas: { flags: ["-n", "-s"], values: ["-u", "-C"] },
  strace: {
    flags: ["-f", "-ff", "-c", "-C", "-T", "-t", "-tt", "-ttt", "-v", "-x", "-xx", "-y", "-yy"],
    values: ["-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-O", "-S", "-b", "-I", "-X"],
  },
  ltrace: {
    flags: ["-f", "-c", "-C", "-i", "-r", "-S", "-t", "-tt"],
    values: ["-o", "-e", "-p", "-s", "-u", "-n", "-l"],
  },
  flock: {
    flags: [
      "-s",
      "-x",
      "-n",
      "-u",
      "-o",
      "--shared",
      "--exclusive",
      "--nonblock",
      "--unlock",
    ].concat(["--close", "--no-fork", "--verbose", "-e", "-F"]),
    values: ["-w", "--timeout", "-E", "--conflict-exit-code", "-c", "--command"],
    positionals: 1,
  },
  watch: {
    flags: [
      "-b",
      "--beep",
      "-e",
      "--errexit",
      "-g",
      "--chgexit",
      "-t",
      "--no-title",
      "-x",
      "--exec",
    ].concat(["-c", "--color", "-d", "--differences", "-p", "--precise", "-r", "-w"]),
    values: ["-n", "--interval", "-q", "--equexit"],
    runsCode: true,
  },
  taskset: { flags: ["-a", "--all-tasks", "-c", "--cpu-list"], positionals: 1 },
};

/** Wrapper options whose value is a command line run by a shell. */
const CODE_OPTIONS: Record<string, string[]> = {
  env: ["-S", "--split-string"],
  flock: ["-c", "--command"],
};

function wrapper(inv: Invocation, fx: Effects): void {
  const spec = WRAPPERS[inv.name] as (typeof WRAPPERS)[string];
  const scan = scanOptions(inv.args, spec);
  for (const u of scan.unknown) fx.dynamic(`${inv.name} option ${u} the analysis does not know`);
  const codeOptions = CODE_OPTIONS[inv.name] ?? [];
  for (const v of scan.values) {
    if (codeOptions.includes(v.option)) {
      fx.dynamic(`${inv.name} ${v.option} runs a command line`);
      fx.code(v.word?.text ?? "");
    }
    if (inv.name === "env" && (v.option === "-C" || v.option === "--chdir")) fx.cd(undefined);
  }
  if (inv.name === "command" && inv.args.some((a) => a.text === "-v" || a.text === "-V")) return;
  let i = scan.operand + (spec.positionals ?? 0);
  // flock FILE -c CMD: the option comes after the lock file.
  const after = inv.args[i]?.text ?? "";
  if (codeOptions.includes(after)) {
    fx.dynamic(`${inv.name} ${after} runs a command line`);
    fx.code(inv.args[i + 1]?.text ?? "");
    return;
  }
  // env's NAME=value words come before the command.
  while (
    inv.name === "env" &&
    i < inv.args.length &&
    /^[A-Za-z_][A-Za-z0-9_]*=/.test(inv.args[i]?.text ?? "")
  )
    i++;
  const rest = inv.args.slice(i);
  if (rest.length === 0) return;
  if (spec.runsCode === true && !inv.args.some((a) => a.text === "-x" || a.text === "--exec")) {
    fx.dynamic(`${inv.name} runs its arguments with sh -c`);
    fx.code(rest.map((w) => w.text).join(" "));
    return;
  }
  if (inv.name === "xargs") {
    const flag = inv.args.find((a) => a.text.startsWith("-I"));
    const replace =
      flag === undefined
        ? undefined
        : flag.text === "-I"
          ? inv.args[inv.args.indexOf(flag) + 1]?.text
          : flag.text.slice(2);
    const token =
      replace ?? (inv.args.some((a) => /^(-i|--replace)/.test(a.text)) ? "{}" : undefined);
    const words =
      token === undefined || token === ""
        ? rest
        : withPlaceholder(rest, token, "input xargs fills in");
    // xargs appends what it reads as operands (or puts it where its placeholder is): which
    // files a writing command (cp, mv, ln…) gets is its input's doing, not the line's.
    const name = rest[0]?.text.split("/").pop() ?? "";
    if (!READ_ONLY.has(name)) fx.dynamic(`xargs gives ${name} the operands it reads`);
    fx.run(words, "pipe");
    return;
  }
  fx.run(rest, inv.stdin);
}

/** busybox X / toybox X / coreutils --coreutils-prog=X: the applet is the command. */
function multiCall(inv: Invocation, fx: Effects): void {
  const args = inv.args;
  const prog = args[0]?.text.match(/^--coreutils-prog=(.+)$/);
  if (inv.name === "coreutils" && prog) {
    fx.run([{ ...(args[0] as ShellWord), text: prog[1] as string }, ...args.slice(1)], inv.stdin);
    return;
  }
  if (args[0]?.text === "--install") fx.dynamic(`${inv.name} --install`);
  if (args[0] === undefined || args[0].text.startsWith("-")) return;
  const applet = args[0].text.split("/").pop() ?? "";
  if (SHELLS.has(applet)) fx.dynamic(`${inv.name} ${applet}`);
  else if (!READ_ONLY.has(applet) && !MORE_APPLETS.has(applet) && familyOf(applet) === undefined)
    fx.dynamic(`${inv.name} ${applet}: an applet the analysis does not know`);
  fx.run(args, inv.stdin);
}

/** Wrapper and multi-call families by name. */
export const WRAPPER_FAMILIES = new Map<string, Family>([
  ...Object.keys(WRAPPERS).map((n): [string, Family] => [n, wrapper]),
  ["busybox", multiCall],
  ["toybox", multiCall],
  ["coreutils", multiCall],
]);
