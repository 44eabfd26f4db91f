/**
 * Secrets: `$ENV.NAME` placeholders in tool input, resolved just in time.
 *
 * The model only ever sees and writes placeholders; the kernel resolves them right before a
 * call executes, on a copy of the input (the `tool.call` event keeps the placeholders).
 * A name must be listed in policy `secrets.allow`; its value comes from the first provider
 * that has it (environment, mounted files). Every value resolved is remembered by the
 * resolver so the redactor can hide it (and its encodings) in whatever comes back.
 *
 * Values never appear in error messages: errors name the secret, never its value.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { AgentdError } from "../errors.ts";
import { safePut } from "./safe-put.ts";

/** A source of secret values. `get` answers undefined when it does not have the name. */
export interface SecretProvider {
  /** For people: "env", "file:/run/secrets". Never a value. */
  readonly name: string;
  get(name: string): Promise<string | undefined>;
}

/** What a placeholder looks like: `$ENV.NAME`. Lower-case names match but are never allowed. */
export const PLACEHOLDER_PATTERN = /\$ENV\.([A-Za-z_][A-Za-z0-9_]*)/g;

/** Names a file provider accepts (and the only ones policy `secrets.allow` can list). */
const SECRET_NAME = /^[A-Z_][A-Z0-9_]*$/;

/** Nesting deeper than this is refused (tool inputs are small JSON documents). */
const MAX_DEPTH = 64;

/**
 * Secrets from an environment map. The composition root passes `process.env`; nothing
 * under internal/ reads the process environment itself.
 */
export function createEnvSecretProvider(env: Record<string, string | undefined>): SecretProvider {
  return {
    name: "env",
    get(name: string): Promise<string | undefined> {
      // Own properties only: "constructor" or "__proto__" must not reach Object.prototype.
      const value = Object.hasOwn(env, name) ? env[name] : undefined;
      return Promise.resolve(typeof value === "string" ? value : undefined);
    },
  };
}

/**
 * Secrets from files: the value of NAME is the content of `DIR/NAME` (a Kubernetes or
 * Docker secret mount), with one trailing line ending ("\n" or "\r\n") removed. Names
 * must be `[A-Z_][A-Z0-9_]*`, so no name can leave the directory. A missing file means
 * "not here" (undefined); any other failure is EIO naming the file, never its content.
 */
export function createFileSecretProvider(dir: string): SecretProvider {
  return {
    name: `file:${dir}`,
    async get(name: string): Promise<string | undefined> {
      if (typeof name !== "string" || !SECRET_NAME.test(name)) {
        throw new AgentdError(
          "EVALIDATION",
          `secret name ${JSON.stringify(String(name)).slice(0, 80)} is not valid: expected [A-Z_][A-Z0-9_]*`,
          { field: "name" },
        );
      }
      const file = join(dir, name);
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT") return undefined;
        throw new AgentdError("EIO", `secret file ${file} cannot be read (${code ?? "error"})`, {
          cause: err,
        });
      }
      if (text.endsWith("\r\n")) return text.slice(0, -2);
      if (text.endsWith("\n")) return text.slice(0, -1);
      return text;
    },
  };
}

export interface SecretResolverOptions {
  /** Policy `secrets.allow`: the only names a placeholder may resolve. */
  allow: readonly string[];
  /** Asked in order; the first that has a name wins. */
  providers: readonly SecretProvider[];
}

export interface SecretResolution {
  /** A deep copy of the input with every placeholder replaced by its value. */
  value: unknown;
  /** The names resolved (each once, in order of first appearance). */
  used: string[];
}

export interface SecretResolver {
  /**
   * Resolves every `$ENV.NAME` in every string of a JSON-like input (object values, array
   * items, nested), on a copy. Object keys are left as they are. EPERMISSION for a name
   * not in policy `secrets.allow`, ESECRET_NOT_FOUND for an allowed name no provider has,
   * EVALIDATION for input that is not JSON-like (functions, symbols, cycles, > 64 deep).
   * Values are looked up on every call (a rotated secret is picked up), each name once.
   */
  resolve(input: unknown): Promise<SecretResolution>;
  /**
   * Every value this resolver has resolved so far, for the redactor. The same array is
   * returned until a new value is added, so callers can compare by identity. Never log it.
   */
  knownValues(): readonly string[];
}

interface Occurrence {
  name: string;
  field: string;
}

export function createSecretResolver(options: SecretResolverOptions): SecretResolver {
  const allowed = new Set(options.allow);
  const providers = [...options.providers];
  const known = new Set<string>();
  let knownList: readonly string[] = Object.freeze([]);

  async function lookup(name: string): Promise<string | undefined> {
    for (const provider of providers) {
      let value: string | undefined;
      try {
        value = await provider.get(name);
      } catch (err) {
        if (err instanceof AgentdError) throw err;
        throw new AgentdError("EIO", `secret provider ${provider.name} failed for ${name}`, {
          cause: err,
        });
      }
      if (value !== undefined) return value;
    }
    return undefined;
  }

  function remember(value: string): void {
    if (known.has(value)) return;
    known.add(value);
    knownList = Object.freeze([...known]);
  }

  return {
    async resolve(input: unknown): Promise<SecretResolution> {
      // 1. Find every placeholder (and refuse what is not JSON-like) before asking anyone.
      const found: Occurrence[] = [];
      collect(input, "input", 0, new Set(), found);
      const names: string[] = [];
      const firstField = new Map<string, string>();
      for (const o of found) {
        if (!firstField.has(o.name)) {
          firstField.set(o.name, o.field);
          names.push(o.name);
        }
      }
      // 2. Policy first: a name outside the allow list is refused whether or not it exists.
      const refused = names.filter((n) => !allowed.has(n));
      if (refused.length > 0) {
        throw new AgentdError(
          "EPERMISSION",
          `${plural(refused, "secret")} ${refused.join(", ")} ${refused.length === 1 ? "is" : "are"} not allowed: add ${refused.length === 1 ? "it" : "them"} to policy secrets.allow`,
          { field: firstField.get(refused[0] as string) },
        );
      }
      // 3. Just in time: ask the providers now, each name once.
      const values = new Map<string, string>();
      const missing: string[] = [];
      for (const name of names) {
        const value = await lookup(name);
        if (value === undefined) missing.push(name);
        else values.set(name, value);
      }
      if (missing.length > 0) {
        const where =
          providers.length === 0
            ? "no providers configured"
            : `looked in ${providers.map((p) => p.name).join(", ")}`;
        throw new AgentdError(
          "ESECRET_NOT_FOUND",
          `${plural(missing, "secret")} ${missing.join(", ")} not found (${where})`,
          { field: firstField.get(missing[0] as string) },
        );
      }
      for (const value of values.values()) remember(value);
      // 4. Substitute on a copy; a value is inserted as it is (never re-scanned, `$&` is literal).
      const value = names.length === 0 ? copy(input) : substitute(input, values);
      return { value, used: names };
    },
    knownValues(): readonly string[] {
      return knownList;
    },
  };
}

function plural(list: readonly string[], word: string): string {
  return list.length === 1 ? word : `${word}s`;
}

function isPlainObject(v: object): v is Record<string, unknown> {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function collect(
  v: unknown,
  field: string,
  depth: number,
  ancestors: Set<object>,
  out: Occurrence[],
): void {
  if (typeof v === "string") {
    if (!v.includes("$ENV.")) return;
    for (const m of v.matchAll(PLACEHOLDER_PATTERN)) out.push({ name: m[1] as string, field });
    return;
  }
  if (v === null || typeof v === "number" || typeof v === "boolean" || v === undefined) return;
  if (typeof v !== "object") {
    throw new AgentdError("EVALIDATION", `${field}: a ${typeof v} is not JSON`, { field });
  }
  if (depth >= MAX_DEPTH) {
    throw new AgentdError("EVALIDATION", `${field}: nested deeper than ${MAX_DEPTH} levels`, {
      field,
    });
  }
  if (ancestors.has(v)) {
    throw new AgentdError("EVALIDATION", `${field}: refers to itself`, { field });
  }
  ancestors.add(v);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) collect(v[i], `${field}[${i}]`, depth + 1, ancestors, out);
  } else if (isPlainObject(v)) {
    for (const k of Object.keys(v)) collect(v[k], `${field}.${k}`, depth + 1, ancestors, out);
  } else {
    throw new AgentdError(
      "EVALIDATION",
      `${field}: a ${v.constructor?.name ?? "object"} is not JSON`,
      {
        field,
      },
    );
  }
  ancestors.delete(v);
}

function mapJson(v: unknown, onString: (s: string) => string): unknown {
  if (typeof v === "string") return onString(v);
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map((item) => mapJson(item, onString));
  const src = v as Record<string, unknown>;
  const out: Record<string, unknown> =
    Object.getPrototypeOf(src) === null ? Object.create(null) : {};
  for (const k of Object.keys(src)) safePut(out, k, mapJson(src[k], onString));
  return out;
}

function copy(v: unknown): unknown {
  return mapJson(v, (s) => s);
}

function substitute(v: unknown, values: ReadonlyMap<string, string>): unknown {
  return mapJson(v, (s) =>
    s.includes("$ENV.")
      ? s.replace(PLACEHOLDER_PATTERN, (whole: string, name: string) => values.get(name) ?? whole)
      : s,
  );
}
