/**
 * The sandbox's dependency cache folder (issue #24): a tmpfs /cache of policy
 * sandbox.cacheSize, and the variables that send each package manager's caches (and
 * Python's user installs, Go's module and build caches, Cargo's home, Maven's local
 * repository, Gradle's home) there. Set at container creation, so they win over the
 * images' own defaults (under /tmp/.cache). The worker saves /cache after a successful
 * setup and restores it in later runs (worker/drive-setup.ts).
 *
 * Must never: point a variable outside /cache, or at a path the workspace diff would see.
 */
export const CACHE_DIR = "/cache";

export const CACHE_ENV: Readonly<Record<string, string>> = {
  XDG_CACHE_HOME: `${CACHE_DIR}/xdg`,
  // npm, pnpm, yarn (classic and berry), corepack's package managers.
  npm_config_cache: `${CACHE_DIR}/npm`,
  npm_config_store_dir: `${CACHE_DIR}/pnpm-store`,
  YARN_CACHE_FOLDER: `${CACHE_DIR}/yarn`,
  COREPACK_HOME: `${CACHE_DIR}/corepack`,
  // pip's downloads, and `pip install --user` (the detected Python setup) into /cache: the
  // root filesystem is read-only, and installed packages must stay out of /workspace.
  PIP_CACHE_DIR: `${CACHE_DIR}/pip`,
  PYTHONUSERBASE: `${CACHE_DIR}/python`,
  // Debian's Python refuses user installs too (PEP 668); they land in /cache only.
  PIP_BREAK_SYSTEM_PACKAGES: "1",
  GOPATH: `${CACHE_DIR}/go`,
  GOMODCACHE: `${CACHE_DIR}/go/pkg/mod`,
  GOCACHE: `${CACHE_DIR}/go-build`,
  CARGO_HOME: `${CACHE_DIR}/cargo`,
  MAVEN_OPTS: `-Dmaven.repo.local=${CACHE_DIR}/m2`,
  GRADLE_USER_HOME: `${CACHE_DIR}/gradle`,
};

/** The tmpfs options of /cache (exec: Go and Cargo run build scripts from it). */
export function cacheMountSpec(bytes: number): string {
  const size = Math.floor(bytes);
  const inodes = Math.max(16_384, Math.floor(size / 4096));
  return `rw,exec,nosuid,nodev,size=${size},nr_inodes=${inodes},uid=1000,gid=1000,mode=0755`;
}
