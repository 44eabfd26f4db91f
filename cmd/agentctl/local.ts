/**
 * agentctl's commands that need no server: version, completion and the config contexts.
 * Must never: print a token, or write the config file readable by others (contexts.ts).
 */
import { UsageError } from "../../internal/cli/client.ts";
import { completionScript } from "../../internal/cli/completion.ts";
import {
  configPath,
  contextNameField,
  loadContexts,
  saveContexts,
} from "../../internal/cli/contexts.ts";
import { outputFormatOf } from "../../internal/cli/output/format.ts";
import { formatList, type Resource } from "../../internal/cli/output/print.ts";
import { createTerminalOut } from "../../internal/cli/terminal-out.ts";
import { versionLine } from "../../internal/version/version.ts";
import { COMMANDS, GLOBAL_FLAGS } from "./help.ts";

// A context's name and address come from the config file: printed escaped like server text.
const stdout = createTerminalOut(process.stdout, false);

type Values = Record<string, string | boolean | string[] | undefined>;
type Local = (args: string[], values: Values) => number;

const str = (v: Values, k: string): string | undefined =>
  typeof v[k] === "string" ? (v[k] as string) : undefined;

export const LOCAL_COMMANDS: Record<string, Local> = {
  version: () => {
    stdout.write(versionLine("agentctl"));
    return 0;
  },
  completion: ([shell]) => {
    if (shell !== "bash" && shell !== "zsh")
      throw new UsageError(
        `completion takes bash or zsh (got ${JSON.stringify(shell)})`,
        "completion",
      );
    const commands = COMMANDS.map((c) => ({ name: c.name, flags: Object.keys(c.flags) }));
    stdout.write(completionScript(shell, commands, Object.keys(GLOBAL_FLAGS)));
    return 0;
  },
  "config use-context": ([name]) => {
    const path = configPath();
    const file = loadContexts(path);
    const n = contextNameField(name as string);
    if (!Object.hasOwn(file.contexts, n))
      throw new UsageError(
        `${path} has no context ${JSON.stringify(n)} (agentctl config get-contexts)`,
        "config use-context",
      );
    saveContexts(path, { ...file, "current-context": n });
    stdout.write(`switched to context ${JSON.stringify(n)}\n`);
    return 0;
  },
  "config set-context": ([name], v) => {
    const path = configPath();
    const file = loadContexts(path);
    const n = contextNameField(name as string);
    const before = Object.hasOwn(file.contexts, n) ? file.contexts[n] : undefined;
    const addr = str(v, "server") ?? before?.addr;
    if (addr === undefined)
      throw new UsageError(`a new context needs --server URL`, "config set-context");
    const tokenFile = str(v, "token-file") ?? before?.["token-file"];
    const caFile = str(v, "ca-file") ?? before?.["ca-file"];
    file.contexts[n] = {
      addr,
      ...(tokenFile === undefined ? {} : { "token-file": tokenFile }),
      ...(caFile === undefined ? {} : { "ca-file": caFile }),
    };
    saveContexts(path, file);
    stdout.write(
      `context ${JSON.stringify(n)} ${before === undefined ? "added" : "changed"} in ${path}\n`,
    );
    return 0;
  },
  "config get-contexts": (_args, v) => {
    const output = outputFormatOf(v, "config get-contexts");
    const file = loadContexts(configPath());
    if (output !== undefined) {
      // The file's own field names; never a token (a context names its token file only).
      const items: Resource[] = Object.entries(file.contexts).map(([name, c]) => ({
        kind: "context",
        id: name,
        json: { name, ...c, current: name === file["current-context"] },
      }));
      stdout.write(formatList(output, items));
      return 0;
    }
    const rows = Object.entries(file.contexts).map(
      ([n, c]) =>
        `${n === file["current-context"] ? "*" : " "} ${n}\t${c.addr}\t${c["token-file"] ?? "-"}`,
    );
    stdout.write(
      rows.length === 0
        ? "no contexts (agentctl config set-context NAME --server URL)\n"
        : `${rows.join("\n")}\n`,
    );
    return 0;
  },
  "config current-context": () => {
    const current = loadContexts(configPath())["current-context"];
    if (current === undefined)
      throw new UsageError("no current context is set", "config current-context");
    stdout.write(`${current}\n`);
    return 0;
  },
  "config delete-context": ([name]) => {
    const path = configPath();
    const file = loadContexts(path);
    const n = contextNameField(name as string);
    if (!Object.hasOwn(file.contexts, n))
      throw new UsageError(`${path} has no context ${JSON.stringify(n)}`, "config delete-context");
    delete file.contexts[n];
    if (file["current-context"] === n) delete file["current-context"];
    saveContexts(path, file);
    stdout.write(`context ${JSON.stringify(n)} deleted\n`);
    return 0;
  },
};
