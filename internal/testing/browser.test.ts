/**
 * The browser harness end to end: a page served from loopback, filled and clicked by role in
 * real headless chromium, screenshotted at a desktop and a phone viewport.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { Browser } from "playwright-core";
import { launchBrowser, screenshotDir } from "./browser.ts";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>browser smoke</title>
<style>
  body { font: 16px system-ui, sans-serif; margin: 2rem; }
  main { max-width: 40rem; display: grid; gap: 1rem; }
  input, button { font: inherit; padding: .5rem; }
  #greeting { padding: 1rem; background: #eef; border-radius: .5rem; }
</style>
</head>
<body>
<main>
  <h1>Browser smoke test</h1>
  <input aria-label="Your name" id="name" placeholder="name">
  <button type="button" id="greet">Say hello</button>
  <p id="greeting" role="status">Nobody greeted yet</p>
</main>
<script>
  document.getElementById("greet").addEventListener("click", () => {
    const name = document.getElementById("name").value.trim() || "stranger";
    document.getElementById("greeting").textContent = "Hello, " + name + "!";
  });
</script>
</body>
</html>`;

let server: http.Server;
let url: string;
let browser: Browser | undefined;

before(async () => {
  server = http.createServer((req, res) => {
    if (req.url === "/") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(PAGE);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

after(async () => {
  await browser?.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

test("chromium fills, clicks by role and screenshots a page at two viewports", async () => {
  const t0 = performance.now();
  browser = await launchBrowser();
  console.log(
    `browser: chromium ${browser.version()} launched in ${Math.round(performance.now() - t0)} ms`,
  );
  const page = await browser.newPage();
  await page.goto(url);

  const status = page.getByRole("status");
  assert.equal(await status.textContent(), "Nobody greeted yet");
  await page.getByRole("textbox", { name: "Your name" }).fill("Ada");
  await page.getByRole("button", { name: "Say hello" }).click();
  await status.getByText("Hello, Ada!").waitFor({ timeout: 120_000 });
  assert.equal(await status.textContent(), "Hello, Ada!");

  const dir = screenshotDir("browser-smoke");
  for (const [label, width, height] of [
    ["desktop-1280x800", 1280, 800],
    ["phone-390x844", 390, 844],
  ] as const) {
    const file = join(dir, `${label}.png`);
    rmSync(file, { force: true });
    await page.setViewportSize({ width, height });
    // The page's own view of its size (a string: this repo's TypeScript has no DOM types).
    const inner = await page.evaluate<[number, number]>("[innerWidth, innerHeight]");
    assert.deepEqual(inner, [width, height]);
    await page.screenshot({ path: file });
    assert.ok(statSync(file).size > 0, `${file} is empty`);
    // A PNG of the viewport: the signature, then the IHDR chunk's width and height.
    const png = readFileSync(file);
    assert.equal(png.subarray(0, 8).toString("hex"), "89504e470d0a1a0a", `${file} is not a PNG`);
    assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [width, height]);
  }
});
