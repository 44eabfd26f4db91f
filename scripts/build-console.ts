/**
 * Builds the web console (issue #18) into internal/console/dist, which agentd serves at /ui/
 * (internal/server/console.ts): esbuild bundles internal/console/src/main.tsx (Preact) and
 * styles.css into content-hashed, minified assets/app-<hash>.js and .css, and index.html
 * names them, each with a gzipped copy next to it (file.gz) that the server sends to
 * browsers that accept it. No inline script or style (the page's CSP forbids both), no
 * source maps.
 * Run by `make build`; `node scripts/build-console.ts`.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "internal", "console", "src");
const dist = join(root, "internal", "console", "dist");
const assets = join(dist, "assets");

const started = performance.now();
rmSync(dist, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });

const result = await build({
  absWorkingDir: root,
  entryPoints: { app: join(src, "main.tsx"), "app-style": join(src, "styles.css") },
  outdir: assets,
  entryNames: "app-[hash]",
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  jsx: "automatic",
  jsxImportSource: "preact",
  sourcemap: false,
  legalComments: "none",
  metafile: true,
  write: true,
  logLevel: "warning",
  define: { "process.env.NODE_ENV": '"production"' },
});

const outputs = Object.keys(result.metafile.outputs).map((p) => join(root, p));
const js = outputs.find((p) => p.endsWith(".js"));
const css = outputs.find((p) => p.endsWith(".css"));
if (js === undefined || css === undefined) throw new Error("esbuild wrote no .js or no .css");

const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>agentd console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/assets/${basename(css)}">
<script type="module" src="/ui/assets/${basename(js)}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The agentd console needs JavaScript.</noscript>
</body>
</html>
`;
writeFileSync(join(dist, "index.html"), html);

for (const file of [js, css, join(dist, "index.html")]) {
  const data = readFileSync(file);
  // Served as is to a browser that accepts gzip (internal/server/console.ts): no work per request.
  writeFileSync(`${file}.gz`, gzipSync(data, { level: 9 }));
  console.log(
    `${relative(root, file).padEnd(52)} ${String(data.length).padStart(7)} B  (${gzipSync(data).length} B gzip)`,
  );
}
console.log(`console built in ${Math.round(performance.now() - started)} ms`);
