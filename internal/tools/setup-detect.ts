/**
 * The setup step's command from the uploaded workspace's lockfile or manifest (issue #24),
 * for a run whose policy (tools.setup) and `.agent/config.yaml` (commands.setup) set none.
 * The first that matches wins:
 *
 *   package-lock.json / npm-shrinkwrap.json → npm ci (NPM_WARM over a restored node_modules)
 *   pnpm-lock.yaml                          → pnpm install --frozen-lockfile
 *   yarn.lock                               → yarn install --immutable (Berry: .yarnrc.yml or
 *                                             a `__metadata:` lockfile), else --frozen-lockfile
 *   requirements.txt                        → python3 -m pip install --user -r requirements.txt
 *   pyproject.toml / setup.py               → python3 -m pip install --user -e .
 *   go.mod                                  → go mod download, then GO_BUILD_WARM (keyed by
 *                                             go.sum when present)
 *   Cargo.toml                              → cargo fetch (keyed by Cargo.lock when present)
 *   pom.xml                                 → mvn -B dependency:go-offline
 *   build.gradle(.kts)                      → ./gradlew (or gradle) --no-daemon dependencies
 *
 * Lines whose whole outcome is in the cache archive and whose inputs are all setup inputs
 * are marked `outcomeInCache` (a warm run with an exact cache hit does not run them,
 * worker/setup-exact-hit.ts): npm ci, pnpm, yarn classic (node_modules is archived); pip
 * -r over a requirements.txt of plain requirements (no -r/-c/-e, options or paths, which
 * read files the key does not digest); go mod download with a go.sum; cargo fetch with a
 * Cargo.lock and no [workspace] or path dependencies; mvn over a pom.xml without <modules>
 * or <parent>. Not yarn berry (Plug'n'Play writes .pnp.cjs into /workspace), pip -e
 * (metadata in /workspace), Gradle (subprojects, catalogs and wrapper properties are not
 * keyed), or anything configured.
 *
 * A package.json without a lockfile gets no setup: `npm install` would resolve versions
 * anew on every run, and a cache keyed by what it fetched would key nothing.
 *
 * Pure: reads only the root-level files it is given. Must never build a line from the
 * workspace's text: every line here is a constant.
 */
import type { SetupSpec } from "./command-spec.ts";

/** Root-level files setup detection (and the cache key) reads. */
export const SETUP_FILES: readonly string[] = [
  "package.json",
  "package-lock.json",
  "npm-shrinkwrap.json",
  "pnpm-lock.yaml",
  "yarn.lock",
  ".yarnrc.yml",
  ".npmrc",
  "requirements.txt",
  "pyproject.toml",
  "setup.py",
  "setup.cfg",
  "go.mod",
  "go.sum",
  "Cargo.toml",
  "Cargo.lock",
  "pom.xml",
  "build.gradle",
  "build.gradle.kts",
  "settings.gradle",
  "settings.gradle.kts",
  "gradlew",
];

type Files = ReadonlyMap<string, Buffer>;

/**
 * npm ci's line when node_modules came back from a cache saved under the same key (same
 * package.json and lockfile, made by npm ci): npm install finds the tree up to date and
 * leaves it (npm ci would delete and reinstall it); --no-save keeps package.json and the
 * lockfile untouched whatever it finds.
 */
export const NPM_WARM = "npm install --no-save --prefer-offline";

/**
 * After `go mod download`: compile every package and its tests into GOCACHE (/cache/go-build,
 * saved with the cache), so a later run's first `go test` does not compile the standard
 * library's test dependencies again (30-50 s on one CPU for a one-file module). `-exec true`
 * runs /bin/true instead of each test binary (the setup runs none of the repository's code),
 * `-count=1` caches no test result. A package that does not compile (the bug the run is
 * about may be one) does not fail the setup: test.run reports it.
 */
export const GO_BUILD_WARM = "{ go test -count=1 -exec true ./... >/dev/null 2>&1 || true; }";
export const GO_SETUP = `go mod download && ${GO_BUILD_WARM}`;

/** The detected setup step, or undefined when the workspace declares no dependencies. */
export function detectSetup(files: Files): SetupSpec | undefined {
  const has = (p: string) => files.has(p);
  const text = (p: string) => files.get(p)?.toString("utf8") ?? "";
  const spec = (
    command: string,
    ecosystem: string,
    lockfile: string,
    inCache = false,
  ): SetupSpec => ({
    command,
    ecosystem,
    lockfile,
    source: lockfile,
    ...(inCache ? { outcomeInCache: true as const } : {}),
  });
  for (const lock of ["package-lock.json", "npm-shrinkwrap.json"])
    if (has(lock)) return { ...spec("npm ci", "npm", lock, true), warm: NPM_WARM };
  if (has("pnpm-lock.yaml"))
    return spec("pnpm install --frozen-lockfile", "npm", "pnpm-lock.yaml", true);
  if (has("yarn.lock")) {
    const berry = has(".yarnrc.yml") || /^__metadata:/m.test(text("yarn.lock"));
    return berry
      ? spec("yarn install --immutable", "npm", "yarn.lock")
      : spec("yarn install --frozen-lockfile", "npm", "yarn.lock", true);
  }
  if (has("requirements.txt"))
    return spec(
      "python3 -m pip install --user -r requirements.txt",
      "pypi",
      "requirements.txt",
      plainRequirements(text("requirements.txt")),
    );
  for (const m of ["pyproject.toml", "setup.py"])
    if (has(m)) return spec("python3 -m pip install --user -e .", "pypi", m);
  if (has("go.mod"))
    return has("go.sum") ? spec(GO_SETUP, "go", "go.sum", true) : spec(GO_SETUP, "go", "go.mod");
  if (has("Cargo.toml")) {
    const toml = text("Cargo.toml");
    const alone = !/^\s*\[\s*workspace/m.test(toml) && !/\bpath\s*=/.test(toml);
    return has("Cargo.lock")
      ? spec("cargo fetch", "cargo", "Cargo.lock", alone)
      : spec("cargo fetch", "cargo", "Cargo.toml");
  }
  if (has("pom.xml")) {
    const alone = !/<(modules|parent)\b/.test(text("pom.xml"));
    return spec("mvn -B dependency:go-offline", "maven", "pom.xml", alone);
  }
  for (const g of ["build.gradle.kts", "build.gradle"])
    if (has(g))
      return spec(
        `${has("gradlew") ? "sh ./gradlew" : "gradle"} --no-daemon dependencies`,
        "gradle",
        g,
      );
  return undefined;
}

/**
 * Whether every line of a requirements.txt is a plain requirement (a name, extras, a
 * version, markers) or a comment: no option (-r, -c, -e, --index-url…) and no path or URL,
 * which would make pip read what the cache key does not digest.
 */
function plainRequirements(text: string): boolean {
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/(^|\s)#.*$/, "").trim();
    if (line === "") continue;
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,\s-]*\])?\s*([<>=!~;(]|$)/.test(line))
      return false;
    if (/[/\\@]|:\/\//.test(line.split(";")[0] ?? "")) return false;
  }
  return true;
}
