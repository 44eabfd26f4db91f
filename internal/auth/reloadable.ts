/**
 * An auth file that can change under a running server: `reload()` (SIGHUP, or a change
 * the file watch saw) reads it again and swaps the tokens in one step; a file that is
 * broken or unreadable changes nothing (the last good tokens stay, the error is logged).
 * So a token is rotated, added or revoked without a restart — a Kubernetes Secret mounted
 * as a file is updated in place. Must never: serve with no tokens because a reload failed.
 */
import { type FSWatcher, watch } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "../telemetry/logger.ts";
import { type Authenticator, createTokenAuthenticator, loadAuthFile } from "./tokens.ts";

export interface ReloadableAuth extends Authenticator {
  /** Reads the file again; false (and nothing changed) when it is broken. */
  reload(): boolean;
  /** Called after each reload that changed the tokens (open streams are checked again). */
  onReload(listener: () => void): void;
  close(): void;
}

export function createReloadableAuth(path: string, logger: Logger): ReloadableAuth {
  const first = loadAuthFile(path);
  let current = createTokenAuthenticator(first.tokens, first.tenants);
  let count = first.tokens.length;
  const listeners: (() => void)[] = [];
  const reload = (): boolean => {
    try {
      const file = loadAuthFile(path);
      current = createTokenAuthenticator(file.tokens, file.tenants);
      count = file.tokens.length;
      logger.info(
        { authFile: path, tokens: count, tenants: file.tenants.size },
        "auth file reloaded",
      );
      for (const l of listeners) l();
      return true;
    } catch (err) {
      logger.error(
        { authFile: path, err: { message: (err as Error).message } },
        "auth file reload failed: keeping the last good tokens",
      );
      return false;
    }
  };
  const watcher = watchFile(path, reload);
  return {
    authenticate: (authorization) => current.authenticate(authorization),
    tenantConfig: (tenantId) => current.tenantConfig(tenantId),
    tenantIds: () => current.tenantIds?.() ?? [],
    tokenIds: () => current.tokenIds?.() ?? new Set(),
    reload,
    onReload: (l) => void listeners.push(l),
    close: () => watcher?.close(),
  };
}

/**
 * Calls `onChange` (debounced) when the file changes. Watches its directory, not the file:
 * editors and Kubernetes replace a file (a new inode, a symlink swap), which a watch on the
 * file itself would miss after the first time.
 */
export function watchFile(
  path: string,
  onChange: () => void,
  debounceMs = 200,
): FSWatcher | undefined {
  let timer: NodeJS.Timeout | undefined;
  try {
    const w = watch(dirname(path), { persistent: false }, (_event, name) => {
      if (name !== null && name !== basename(path) && !name.startsWith("..")) return;
      clearTimeout(timer);
      timer = setTimeout(onChange, debounceMs);
      timer.unref();
    });
    w.on("error", () => undefined);
    return w;
  } catch {
    return undefined; // no watch on this file system: SIGHUP still reloads
  }
}
