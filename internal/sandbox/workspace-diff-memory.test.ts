/**
 * The workspace diff's memory bound, measured in child processes (workspace-diff-memory-
 * probe.ts) so no other test disturbs the figures: a 1 GiB changed file streamed through
 * both passes ends in ETOOLARGE naming the limit, and a 200 MiB unchanged file is hashed,
 * never held; each with well under 100 MB of RSS growth.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const MiB = 1024 * 1024;
const probe = join(dirname(fileURLToPath(import.meta.url)), "workspace-diff-memory-probe.ts");

interface Figures {
  code?: string;
  field?: string;
  message?: string;
  modified?: string[];
  added?: string[];
  patchBytes?: number;
  ms: number;
  rssGrowth: number;
  arrayBuffersGrowth: number;
}

function measure(mode: "changed" | "unchanged" | "control", bytes: number): Figures {
  const out = execFileSync(process.execPath, ["--expose-gc", probe, mode, String(bytes)], {
    encoding: "utf8",
    timeout: 170_000,
  });
  const figures = JSON.parse(out) as Figures;
  const mb = (n: number) => (n / MiB).toFixed(1);
  console.log(
    `# ${mode} ${mb(bytes)} MiB file: ${figures.ms} ms, RSS +${mb(figures.rssGrowth)} MiB, array buffers +${mb(figures.arrayBuffersGrowth)} MiB`,
  );
  return figures;
}

describe("workspace diff memory", () => {
  it("a 1 GiB changed file: ETOOLARGE naming the limit, under 100 MB of growth", () => {
    const f = measure("changed", 1024 * MiB);
    assert.equal(f.code, "ETOOLARGE");
    assert.equal(f.field, "limits.maxPatchSize");
    assert.match(
      f.message ?? "",
      /^the run's changes \(1073741830 bytes in "big\.bin" and 1 other files\) exceed limits\.maxPatchSize \(67108864 bytes\)$/,
    );
    assert.ok(f.rssGrowth < 100 * MiB, `RSS grew ${f.rssGrowth} bytes`);
    assert.ok(f.arrayBuffersGrowth < 100 * MiB, `array buffers grew ${f.arrayBuffersGrowth}`);
  });

  it("a 200 MiB unchanged file is hashed, never held", () => {
    const f = measure("unchanged", 200 * MiB);
    assert.deepEqual(f.modified, ["small.txt"]);
    assert.ok(f.rssGrowth < 100 * MiB, `RSS grew ${f.rssGrowth} bytes`);
    assert.ok(f.arrayBuffersGrowth < 100 * MiB, `array buffers grew ${f.arrayBuffersGrowth}`);
  });

  it("control: a changed 64 MiB file under a limit it fits is held, and the figures show it", () => {
    const f = measure("control", 64 * MiB);
    assert.deepEqual([f.added, f.modified], [["big.bin"], ["small.txt"]]);
    assert.ok(f.rssGrowth > 64 * MiB, `RSS grew only ${f.rssGrowth} bytes`);
  });
});
