// Builds dist/: the TypeScript sources compiled by the repository's tsc (.ts imports
// rewritten to .js), plus the generated protobuf code, which is JS and .d.ts already.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tsc = join(here, "..", "..", "node_modules", "typescript", "bin", "tsc");
if (!existsSync(tsc)) throw new Error(`no tsc at ${tsc}: run make setup in the repository first`);
rmSync(join(here, "dist"), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", join(here, "tsconfig.json")], { stdio: "inherit" });
cpSync(join(here, "src", "gen"), join(here, "dist", "gen"), { recursive: true });
