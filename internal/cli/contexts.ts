/**
 * agentctl's contexts, as kubectl and gh keep them: a YAML file naming servers (an address
 * and a token file each) and the current one.
 *
 *   current-context: prod
 *   contexts:
 *     prod: {addr: https://agentd.internal:7070, token-file: ~/.config/agentd/prod.token,
 *            ca-file: ~/.config/agentd/prod-ca.pem}
 *     local: {addr: http://127.0.0.1:7070}
 *
 * The file is $AGENTCTL_CONFIG, else $XDG_CONFIG_HOME/agentd/config.yaml, else
 * ~/.config/agentd/config.yaml. Flags and env (--addr, --token, AGENTD_ADDR, AGENTD_TOKEN)
 * override what a context says; --context / AGENTD_CONTEXT pick another context.
 *
 * Must never: read a token file others can read, trust a config file others can write, or
 * write the file so that others can read it. Every refusal names the file and the field.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { z } from "zod";
import { UsageError } from "./client.ts";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

const ContextSchema = z
  .object({
    addr: z.string().min(1).max(2048),
    "token-file": z.string().min(1).max(4096).optional(),
    /** PEM of the CA that signed the server's certificate (a private CA). */
    "ca-file": z.string().min(1).max(4096).optional(),
  })
  .strict();

const FileSchema = z
  .object({
    "current-context": z.string().optional(),
    contexts: z
      .record(
        z.string().regex(NAME, "a context name is 1-63 characters of [A-Za-z0-9._-]"),
        ContextSchema,
      )
      .default({}),
  })
  .strict();

export type ContextsFile = z.infer<typeof FileSchema>;
export type Context = z.infer<typeof ContextSchema>;

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AGENTCTL_CONFIG) return resolve(env.AGENTCTL_CONFIG);
  const base = env.XDG_CONFIG_HOME ? env.XDG_CONFIG_HOME : join(env.HOME ?? homedir(), ".config");
  return join(base, "agentd", "config.yaml");
}

/** The file's contexts; an empty set when there is no file. */
export function loadContexts(path: string): ContextsFile {
  if (!existsSync(path)) return { contexts: {} };
  const mode = statSync(path).mode;
  if ((mode & 0o022) !== 0)
    throw new UsageError(
      `${path}: writable by group or others (mode ${(mode & 0o777).toString(8)}): anyone could point agentctl elsewhere; chmod 600 ${path}`,
    );
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, "utf8"), { maxAliasCount: 10 }) ?? {};
  } catch (err) {
    throw new UsageError(`${path}: not YAML (${(err as Error).message.split("\n")[0]})`);
  }
  const parsed = FileSchema.safeParse(doc);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UsageError(`${path}: ${issue?.path.join(".") || "(top level)"}: ${issue?.message}`);
  }
  return parsed.data;
}

/** Writes the file (mode 600, through a rename: never half written). */
export function saveContexts(path: string, file: ContextsFile): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, stringifyYaml(file), { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function contextNameField(name: string): string {
  if (!NAME.test(name))
    throw new UsageError(`context name ${JSON.stringify(name)}: 1-63 characters of [A-Za-z0-9._-]`);
  return name;
}

/** The context in use: --context, else AGENTD_CONTEXT, else the file's current-context. */
export function selectContext(
  file: ContextsFile,
  path: string,
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
): { name: string; context: Context } | undefined {
  const [name, from] =
    flag !== undefined && flag !== ""
      ? [flag, "--context"]
      : env.AGENTD_CONTEXT
        ? [env.AGENTD_CONTEXT, "AGENTD_CONTEXT"]
        : [file["current-context"], "current-context"];
  if (name === undefined || name === "") return undefined;
  const context = Object.hasOwn(file.contexts, name) ? file.contexts[name] : undefined;
  if (context === undefined)
    throw new UsageError(
      `${from} names context ${JSON.stringify(name)}, which ${path} does not have (agentctl config get-contexts)`,
    );
  return { name, context };
}

/** The token of a context's token file: checked like ssh checks a key. */
export function readTokenFile(contextName: string, file: string, configFile: string): string {
  const field = `contexts.${contextName}.token-file`;
  const path = expandHome(file, configFile);
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch {
    throw new UsageError(`${configFile}: ${field}: ${path} does not exist`);
  }
  if ((mode & 0o077) !== 0)
    throw new UsageError(
      `${configFile}: ${field}: ${path} is readable by group or others (mode ${(mode & 0o777).toString(8)}); chmod 600 ${path}`,
    );
  const token = readFileSync(path, "utf8").trim();
  if (token === "" || /\s/.test(token))
    throw new UsageError(`${configFile}: ${field}: ${path} must hold one token on one line`);
  return token;
}

/** `~/x` from home; a relative path from the config file's folder. */
export function expandHome(p: string, configFile: string): string {
  if (p === "~" || p.startsWith("~/")) return join(homedir(), p.slice(1));
  return isAbsolute(p) ? p : resolve(dirname(configFile), p);
}
