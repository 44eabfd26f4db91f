/**
 * The language images (sandbox-images/python, go, rust, java, node) through the real
 * DockerSandbox, on the agent's fast path: each runs its toolchain's version command and
 * a tiny project's tests written into the workspace, offline, as user 1000 on a read-only
 * root; a failing test fails. No `docker exec` is made (the engine's events show no
 * exec_create for the container): every call goes through the in-container agent. Needs
 * `make images`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type Docker from "dockerode";
import { ulid } from "ulid";
import { sandboxImage, testSandbox } from "../testing/docker.ts";
import type { Sandbox, SandboxHandle } from "./port.ts";
import { packWorkspace } from "./workspace-archive.ts";

let docker: Docker;
let sandbox: Sandbox;
let cleanup: () => Promise<void>;

before(async () => {
  const t = await testSandbox();
  docker = t.docker;
  sandbox = t.sandbox;
  cleanup = t.cleanup;
});
after(async () => {
  await cleanup?.();
});

type Language = "python" | "go" | "rust" | "java" | "node";

interface Case {
  files: Record<string, string>;
  /** Each must exit 0; its output must match. */
  checks: [command: string, output: RegExp][];
  /** A command that must fail (a failing test). */
  failing: string;
}

const CASES: Record<Language, Case> = {
  python: {
    files: {
      "calc/__init__.py": "def add(a, b):\n    return a + b\n",
      "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
      "tests/test_bad.py": "def test_bad():\n    assert 1 == 2\n",
    },
    checks: [
      ["python3 --version && pip --version", /^Python 3\.\d+/],
      ["python3 -m pytest -q -p no:cacheprovider tests/test_calc.py", /1 passed/],
      ["python3 -m venv /tmp/v && /tmp/v/bin/python -c 'print(\"venv ok\")'", /venv ok/],
    ],
    failing: "python3 -m pytest -q -p no:cacheprovider",
  },
  go: {
    files: {
      "go.mod": "module example.com/calc\n\ngo 1.19\n",
      "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
      "calc_test.go":
        'package calc\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 || os.Getenv("FAIL") != "" {\n\t\tt.Fatal("bad sum")\n\t}\n}\n',
    },
    checks: [
      ["go version && go env GOTOOLCHAIN", /^go version go1\.\d+.*\nlocal$/],
      ["go test ./...", /^ok\s+example\.com\/calc/m],
      ["go vet ./...", /^$/],
    ],
    failing: "FAIL=1 go test ./...",
  },
  rust: {
    files: {
      "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
      "src/lib.rs":
        'pub fn add(a: u32, b: u32) -> u32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 3), 5); }\n    #[test]\n    fn fails_when_asked() { assert!(std::env::var("FAIL").is_err()); }\n}\n',
    },
    checks: [
      ["rustc -V && cargo -V", /^rustc \d+\.\d+.*\ncargo \d+\.\d+/],
      ["cargo test --offline 2>&1", /test result: ok\. 2 passed/],
    ],
    failing: "FAIL=1 cargo test --offline",
  },
  java: {
    files: {
      "Hello.java":
        'public class Hello {\n  public static void main(String[] a) {\n    if (a.length > 0) throw new AssertionError("boom");\n    System.out.println("hello " + Runtime.version().feature());\n  }\n}\n',
    },
    checks: [
      ["java -version 2>&1 && javac -version", /version "\d+/],
      ["javac -d /tmp/out Hello.java && java -cp /tmp/out Hello", /^hello \d+$/m],
      ["mvn -v", /Apache Maven \d+\.\d+/],
      ["gradle -v --offline", /^Gradle \d+\.\d+/m],
    ],
    failing: "javac -d /tmp/out2 Hello.java && java -cp /tmp/out2 Hello fail",
  },
  node: {
    files: {
      "package.json": JSON.stringify({
        name: "calc",
        version: "1.0.0",
        scripts: { test: "node --test" },
      }),
      "add.test.mjs":
        'import test from "node:test";\nimport assert from "node:assert";\ntest("adds", () => assert.equal(2 + 3, process.env.FAIL ? 6 : 5));\n',
    },
    checks: [
      ["node --version && npm --version", /^v24\.\d+\.\d+\n\d+\.\d+/],
      ["pnpm --version && yarn --version", /^\d+\.\d+\.\d+\n1\.22\.\d+$/m],
      ["npm test 2>&1", /pass 1/],
      ["pnpm test 2>&1 && yarn test 2>&1", /pass 1[\s\S]*pass 1/],
    ],
    failing: "FAIL=1 npm test",
  },
};

async function boxFor(lang: Language, files: Record<string, string>): Promise<SandboxHandle> {
  return sandbox.create({
    runId: ulid(),
    tenantId: "acme",
    image: sandboxImage(lang),
    limits: {
      memoryBytes: 1536 * 1024 * 1024,
      cpus: 1,
      pids: 512,
      tmpBytes: 768 * 1024 * 1024,
      workspaceBytes: 256 * 1024 * 1024,
    },
    network: "none",
    workspaceTar: await packWorkspace(
      Object.entries(files).map(([path, text]) => ({
        path,
        type: "file" as const,
        mode: 0o644,
        data: Buffer.from(text),
      })),
    ),
  });
}

/** The engine's exec_create events for a container since `since` (seconds), up to now. */
async function execsOf(id: string, since: number): Promise<number> {
  const stream = (await docker.getEvents({
    since,
    until: Math.ceil(Date.now() / 1000) + 1,
    filters: JSON.stringify({ container: [id], event: ["exec_create"] }),
  })) as unknown as AsyncIterable<Buffer>;
  let text = "";
  for await (const chunk of stream) text += chunk.toString();
  return text.split("\n").filter((l) => l.includes("exec_create")).length;
}

function sh(box: SandboxHandle, command: string) {
  // Generous: a cold build on a loaded machine (Go compiles its standard library once).
  return box.exec({ argv: ["sh", "-c", command], timeoutMs: 240_000, maxOutputBytes: 1 << 20 });
}

describe("language images through the agent", () => {
  for (const lang of Object.keys(CASES) as Language[]) {
    it(`${lang}: its toolchain and a tiny project's tests, offline, as user 1000`, async () => {
      const c = CASES[lang];
      const since = Math.floor(Date.now() / 1000) - 1;
      const box = await boxFor(lang, c.files);
      try {
        const info = await docker.getContainer(box.id).inspect();
        assert.deepEqual(
          info.Config.Entrypoint,
          ["/usr/local/libexec/agentd-agent"],
          "the agent runs",
        );
        assert.equal(info.Config.Labels["org.agentd.sandbox.ecosystem"], lang);
        for (const [command, output] of c.checks) {
          const r = await sh(box, command);
          assert.equal(r.exitCode, 0, `${command}: ${r.stdout}\n${r.stderr}`);
          assert.match(r.stdout.trim(), output, `${command}: ${r.stdout}`);
        }
        const who = await sh(box, "id -u; pwd; touch /usr/x 2>/dev/null || echo read-only");
        assert.equal(who.stdout, "1000\n/workspace\nread-only\n");
        const bad = await sh(box, c.failing);
        assert.notEqual(bad.exitCode, 0, `${c.failing} must fail: ${bad.stdout}`);
        const execs = await execsOf(box.id, since);
        assert.equal(execs, 0, "no docker exec: every call went through the agent");
      } finally {
        await box.destroy();
      }
    });
  }
});
