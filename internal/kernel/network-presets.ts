/**
 * Registry presets of the policy's `network.presets` (issue #24): a name for each package
 * ecosystem's default public registry, standing for the hosts its ordinary client reaches
 * (port 443 only). `networkOf` (worker/drive-egress.ts) adds them to network.allow.
 *
 * Must never: name a host that is not the ecosystem's own default registry or download
 * host (a preset is a promise about where a setup's downloads come from), or a wildcard.
 */

/** Each preset's hosts, as network.allow entries. */
export const NETWORK_PRESETS = {
  // npm, pnpm and yarn classic (registry.yarnpkg.com mirrors the npm registry);
  // corepack fetches yarn berry itself from repo.yarnpkg.com.
  npm: ["registry.npmjs.org:443", "registry.yarnpkg.com:443", "repo.yarnpkg.com:443"],
  // pip: the index (pypi.org/simple) and the files it links to.
  pypi: ["pypi.org:443", "files.pythonhosted.org:443"],
  // GOPROXY's and GOSUMDB's defaults.
  go: ["proxy.golang.org:443", "sum.golang.org:443"],
  // The sparse index, the crate downloads it names (dl), and crates.io's API.
  cargo: ["index.crates.io:443", "static.crates.io:443", "crates.io:443"],
  // Maven Central as Maven 3 (repo.maven.apache.org) and older clients (repo1) reach it;
  // Gradle's mavenCentral() is the same host.
  maven: ["repo.maven.apache.org:443", "repo1.maven.org:443"],
} as const satisfies Record<string, readonly string[]>;

export type PresetName = keyof typeof NETWORK_PRESETS;

export const PRESET_NAMES = Object.keys(NETWORK_PRESETS) as PresetName[];

export function isPresetName(name: string): name is PresetName {
  return Object.hasOwn(NETWORK_PRESETS, name);
}

/** The allow entries of the named presets, in order, without repeats. */
export function presetHosts(names: readonly string[]): string[] {
  const out = new Set<string>();
  for (const n of names) if (isPresetName(n)) for (const h of NETWORK_PRESETS[n]) out.add(h);
  return [...out];
}
