/**
 * Shell completion scripts for agentctl, generated from its command table: command names
 * (two-word ones like `artifact get`, `config use-context` too) and each command's flags.
 * zsh uses the same function through bashcompinit. Pure: returns the script text.
 */
export interface CompletionCommand {
  name: string;
  flags: readonly string[];
}

export function completionScript(
  shell: "bash" | "zsh",
  commands: readonly CompletionCommand[],
  globalFlags: readonly string[],
): string {
  const firsts = [...new Set(commands.map((c) => c.name.split(" ")[0] as string))];
  const seconds = new Map<string, string[]>();
  for (const c of commands) {
    const [a, b] = c.name.split(" ");
    if (b !== undefined) seconds.set(a as string, [...(seconds.get(a as string) ?? []), b]);
  }
  const flagCases = commands
    .map(
      (c) =>
        `    ${JSON.stringify(c.name)}) flags="${[...c.flags, ...globalFlags].map((f) => `--${f}`).join(" ")}" ;;`,
    )
    .join("\n");
  const subCases = [...seconds]
    .map(([a, subs]) => `    ${a}) subs="${subs.join(" ")}" ;;`)
    .join("\n");
  const fn = `_agentctl() {
  local cur words cmd="" i w subs="" flags=""
  cur="\${COMP_WORDS[COMP_CWORD]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$w" in -*) continue ;; esac
    if [ -z "$cmd" ]; then cmd="$w"
    elif [ "$cmd" = "\${cmd% *}" ]; then
      case "$cmd" in ${[...seconds.keys()].join("|") || "__none__"}) cmd="$cmd $w" ;; esac
    fi
  done
  if [ -z "$cmd" ]; then
    COMPREPLY=($(compgen -W "${firsts.join(" ")} ${globalFlags.map((f) => `--${f}`).join(" ")}" -- "$cur"))
    return 0
  fi
  case "$cmd" in
${subCases}
  esac
  if [ -n "$subs" ] && [ "$cmd" = "\${cmd% *}" ]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    return 0
  fi
  case "$cmd" in
${flagCases}
  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$flags" -- "$cur")); fi
  return 0
}`;
  if (shell === "bash")
    return `# agentctl completion for bash: source <(agentctl completion bash)\n${fn}\ncomplete -F _agentctl agentctl\n`;
  return `#compdef agentctl
# agentctl completion for zsh: source <(agentctl completion zsh), or save as _agentctl on $fpath
autoload -U +X bashcompinit && bashcompinit
${fn}
complete -F _agentctl agentctl
`;
}
