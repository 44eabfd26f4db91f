/**
 * A private image registry for tests (Debian's docker-registry, the CNCF distribution
 * registry) on 127.0.0.1 with htpasswd (bcrypt) auth, in a temporary directory; the Docker
 * engine pulls from 127.0.0.0/8 over plain HTTP by default. And images to push to it: a
 * root with no shell at all (busybox copies named cat, ls and tee only, no /etc/passwd),
 * made with `docker import`. In CI a missing docker-registry or htpasswd is a failure.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type Docker from "dockerode";
import * as tar from "tar-stream";
import { ulid } from "ulid";

export interface TestRegistry {
  /** "127.0.0.1:PORT" */
  host: string;
  username: string;
  password: string;
  stop(): Promise<void>;
}

function which(cmd: string, pkg: string): string {
  try {
    return execFileSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      `${cmd} is not installed: apt-get install -y ${pkg} (the registry tests need it)`,
    );
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startRegistry(): Promise<TestRegistry> {
  const bin = which("docker-registry", "docker-registry");
  const htpasswd = which("htpasswd", "apache2-utils");
  const dir = mkdtempSync(join(tmpdir(), "agentd-registry-"));
  const port = await freePort();
  const username = "ci";
  const password = `pw-${ulid().toLowerCase()}`;
  execFileSync(htpasswd, ["-Bbc", join(dir, "htpasswd"), username, password], { stdio: "ignore" });
  writeFileSync(
    join(dir, "config.yml"),
    [
      "version: 0.1",
      "log: { level: warn }",
      `storage: { filesystem: { rootdirectory: ${join(dir, "data")} }, delete: { enabled: true } }`,
      `http: { addr: 127.0.0.1:${port}, secret: ${ulid()} }`,
      `auth: { htpasswd: { realm: agentd-test, path: ${join(dir, "htpasswd")} } }`,
      "",
    ].join("\n"),
  );
  const proc: ChildProcess = spawn(bin, ["serve", join(dir, "config.yml")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  proc.stderr?.on("data", (c: Buffer) => {
    if (stderr.length < 8192) stderr += c.toString("utf8");
  });
  // Up once /v2/ answers (401: it wants credentials).
  // Generous: a loaded machine never fails it, only a registry that never answers does.
  const deadline = Date.now() + 120_000;
  for (;;) {
    const status = await fetch(`http://127.0.0.1:${port}/v2/`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 401) break;
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(
        `waited ${proc.exitCode === null ? "120 s" : "until it exited"} for docker-registry to answer 401 on http://127.0.0.1:${port}/v2/: ${stderr.slice(0, 2000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host: `127.0.0.1:${port}`,
    username,
    password,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGKILL");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The host's static busybox (package busybox-static). */
function busybox(): Buffer {
  for (const p of ["/bin/busybox", "/usr/bin/busybox"]) {
    try {
      return readFileSync(p);
    } catch {}
  }
  throw new Error("a static busybox is needed at /bin/busybox (apt-get install -y busybox-static)");
}

/**
 * A new image without any shell: /bin/cat, /bin/ls and /bin/tee (busybox, which picks its
 * applet by name), a file unique to this image (so its layer is new to the registry and a
 * pull moves bytes), no /etc/passwd. Hostile settings a sandbox must ignore: an ENTRYPOINT,
 * a USER, the agent label naming /bin/cat, a VOLUME (an anonymous volume would be outside
 * every limit) and a HEALTHCHECK (the engine would exec it as the container's user, root).
 * `/unique-id` holds `uniqueId`. Returns its id; the caller removes it.
 */
export async function importNoShellImage(
  docker: Docker,
  repoTag: string,
  uniqueId: string = ulid(),
): Promise<string> {
  const bb = busybox();
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => chunks.push(c as Buffer));
  const dir = (name: string) => pack.entry({ name, type: "directory", mode: 0o755 });
  dir("bin");
  pack.entry({ name: "bin/cat", mode: 0o755 }, bb);
  // A hard link's own mode is applied to the file it names: keep it executable.
  pack.entry({ name: "bin/ls", type: "link", linkname: "bin/cat", mode: 0o755 });
  pack.entry({ name: "bin/tee", type: "link", linkname: "bin/cat", mode: 0o755 });
  pack.entry({ name: "unique-id", mode: 0o644 }, `${uniqueId}\n`);
  pack.finalize();
  await new Promise<void>((r) => pack.on("end", () => r()));
  const [repo, tag] = splitTag(repoTag);
  const stream = (await docker.importImage(Buffer.concat(chunks) as unknown as string, {
    repo,
    tag,
    changes: [
      'ENTRYPOINT ["/bin/cat"]',
      "USER 4242",
      "LABEL org.agentd.sandbox.agent=/bin/cat",
      "ENV PATH=/bin",
      "VOLUME /data",
      'HEALTHCHECK --interval=1s CMD ["/bin/cat", "/unique-id"]',
    ],
  })) as unknown as Readable;
  let out = "";
  for await (const c of stream) out += (c as Buffer).toString("utf8");
  if (/"error"/.test(out)) throw new Error(`docker import failed: ${out.slice(0, 500)}`);
  return (await docker.getImage(repoTag).inspect()).Id;
}

function splitTag(repoTag: string): [string, string] {
  const i = repoTag.lastIndexOf(":");
  return i > repoTag.lastIndexOf("/")
    ? [repoTag.slice(0, i), repoTag.slice(i + 1)]
    : [repoTag, "latest"];
}

/** Tags `id` as host/repo:tag, pushes it with the registry's credentials; its digest. */
export async function pushImage(
  docker: Docker,
  reg: TestRegistry,
  id: string,
  repo: string,
  tag: string,
): Promise<string> {
  await docker.getImage(id).tag({ repo: `${reg.host}/${repo}`, tag });
  const stream = (await docker.getImage(`${reg.host}/${repo}:${tag}`).push({
    authconfig: { username: reg.username, password: reg.password, serveraddress: reg.host },
  })) as unknown as Readable;
  let out = "";
  for await (const c of stream) out += (c as Buffer).toString("utf8");
  const m = /"Digest":"(sha256:[a-f0-9]{64})"/.exec(out);
  if (m === null) throw new Error(`push of ${repo}:${tag} failed: ${out.slice(-500)}`);
  return m[1] as string;
}
