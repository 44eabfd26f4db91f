/** Patches, archives and xargs operands: what their input names is written (command-unpacks.ts). */
import assert from "node:assert/strict";
import { it } from "node:test";
import { analyzeCommand } from "./command-analysis.ts";

const dynamic = (line: string) => analyzeCommand(line).dynamic.length > 0;

it("applying a patch or extracting an archive is dynamic, whatever the spelling", () => {
  for (const line of [
    "git apply /tmp/x.patch",
    "base64 -d < p | git apply",
    "git am < /tmp/m",
    "patch -p1 < /tmp/x.patch",
    "patch -p1 -i /tmp/x.patch",
    "tar xf /tmp/t.tar",
    "tar -xzf /tmp/t.tgz",
    "tar --extract -f t.tar",
    "tar -C sub -x -f t.tar",
    "bsdtar -xf t.tar",
    "unzip a.zip",
    "cpio -idmv < a.cpio",
    "7z x a.7z",
    "busybox tar xf t.tar",
    "xargs cp < /tmp/a",
    "xargs -a /tmp/a cp",
    "find . -name '*.json' | xargs cp p.txt",
  ])
    assert.equal(dynamic(line), true, line);
});

it("listing, testing and dry runs are not", () => {
  for (const line of [
    "git apply --check x.patch",
    "git apply --stat x.patch",
    "patch --dry-run -p1 < x.patch",
    "tar tf t.tar",
    "tar -czf out.tgz src",
    "unzip -l a.zip",
    "cpio -t < a.cpio",
    "find . -name '*.ts' | xargs grep foo",
    "xargs -I{} echo {} < list",
  ])
    assert.equal(dynamic(line), false, line);
});
