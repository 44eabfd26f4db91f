/**
 * deploy/kubernetes: every overlay renders with `kubectl kustomize`, every object validates
 * against the Kubernetes OpenAPI schemas of a current release (kubernetes-models, from
 * npm), and what the manifests tell agentd is what agentd accepts: the command, every
 * flag (from `agentd COMMAND --help`), every AGENTD_* variable, the probe paths and ports
 * (on the port the process listens on), and the policy (`agentd policy check`); and that
 * the worker pod holds what allowlist egress needs (dind's network namespace, NET_ADMIN and
 * NET_RAW for the image's iptables). No cluster here: nothing is applied to an API server.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { until } from "../internal/testing/until.ts";

const ROOT = join(import.meta.dirname, "..");
const AGENTD = join(ROOT, "bin", "agentd");
const OVERLAYS = readdirSync(join(ROOT, "deploy", "kubernetes", "overlays"));
const tmp = mkdtempSync(join(tmpdir(), "agentd-k8s-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

// biome-ignore lint/suspicious/noExplicitAny: manifests as parsed YAML
type Obj = any;

/**
 * A copy of deploy/kubernetes with the operator's files an overlay needs (production's own
 * auth.yaml, which git ignores), rendered.
 */
const copy = join(tmp, "kubernetes");
cpSync(join(ROOT, "deploy", "kubernetes"), copy, { recursive: true });
const OPERATOR_TOKEN_SHA = "ab".repeat(32);
writeFileSync(
  join(copy, "overlays", "production", "auth.yaml"),
  `tokens:\n  - name: ops\n    sha256: ${OPERATOR_TOKEN_SHA}\n    tenant: ops\n    roles: [submit, read, approve, admin]\n`,
);

const OPERATOR_REDIS_PASSWORD = "operatorRedisPw4410";
writeFileSync(join(copy, "overlays", "production", "redis-password"), OPERATOR_REDIS_PASSWORD);

function render(overlay: string): Obj[] {
  const out = execFileSync("kubectl", ["kustomize", join(copy, "overlays", overlay)], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  return parseAllDocuments(out).map((d) => d.toJS() as Obj);
}

/** Flags and env variables `agentd COMMAND --help` lists. */
const helpOf = new Map<string, { flags: Set<string>; env: Set<string> }>();
function help(command: string): { flags: Set<string>; env: Set<string> } {
  let h = helpOf.get(command);
  if (h === undefined) {
    const text = execFileSync(AGENTD, [command, "--help"], { encoding: "utf8" });
    h = {
      flags: new Set([...text.matchAll(/^ {2}--([a-z-]+)/gm)].map((m) => m[1] as string)),
      env: new Set([...text.matchAll(/env: (AGENTD_[A-Z_]+)/g)].map((m) => m[1] as string)),
    };
    helpOf.set(command, h);
  }
  return h;
}

const OTHER_ENV = new Set([
  "AGENTD_REDIS_PASSWORD", // environment only, never a flag (named in --event-log's help)
  "AGENTD_IPTABLES_MODE", // the image's iptables wrapper (deploy/image/iptables-wrapper.sh)
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "DOCKER_HOST",
  "DOCKER_TLS_VERIFY",
  "DOCKER_CERT_PATH",
]);

/**
 * kustomize writes a Secret's base64 in lines; the API server's decoder skips the newlines
 * (Go's base64), the schema's "byte" format does not: join them as the server reads them.
 */
function asApiServerReads(o: Obj): Obj {
  if (o.kind !== "Secret" || o.data === undefined) return o;
  const data = Object.fromEntries(
    Object.entries(o.data as Record<string, string>).map(([k, v]) => [k, v.replace(/\s+/g, "")]),
  );
  return { ...o, data };
}

function podSpecs(objs: Obj[]): { owner: string; spec: Obj; annotations: Obj }[] {
  return objs
    .filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet")
    .map((o) => ({
      owner: `${o.kind}/${o.metadata.name}`,
      spec: o.spec.template.spec,
      annotations: o.spec.template.metadata.annotations ?? {},
    }));
}

for (const overlay of OVERLAYS) {
  describe(`deploy/kubernetes/overlays/${overlay}`, () => {
    const objs = render(overlay);

    it("every object validates against the Kubernetes schemas", async () => {
      assert.ok(objs.length >= 10, `${objs.length} objects`);
      for (const o of objs) {
        const group = o.apiVersion as string;
        const mod = (await import(`kubernetes-models/${group}/${o.kind}`)) as Record<
          string,
          new (
            x: Obj,
          ) => { validate(): void }
        >;
        const Model = mod[o.kind];
        assert.ok(Model, `a schema for ${group} ${o.kind}`);
        assert.doesNotThrow(
          () => new Model(asApiServerReads(o)).validate(),
          `${o.kind}/${o.metadata?.name}`,
        );
      }
      const kinds = new Set(objs.map((o) => o.kind));
      for (const k of [
        "Namespace",
        "StatefulSet",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ConfigMap",
        "Secret",
      ])
        assert.ok(kinds.has(k), `a ${k}`);
      assert.ok(objs.every((o) => o.kind === "Namespace" || o.metadata.namespace === "agentd"));
    });

    it("commands, flags, env variables, probes and ports are ones agentd accepts", () => {
      for (const { owner, spec, annotations } of podSpecs(objs)) {
        for (const c of spec.containers as Obj[]) {
          if (!String(c.image).startsWith("agentd:")) continue;
          const [command, ...args] = c.args as string[];
          assert.ok(
            ["server", "worker", "dev"].includes(command as string),
            `${owner}: command ${command}`,
          );
          const h = help(command as string);
          for (const a of args.filter((x) => x.startsWith("--")))
            assert.ok(h.flags.has(a.slice(2)), `${owner}: agentd ${command} has no ${a}`);
          for (const e of (c.env ?? []) as Obj[])
            assert.ok(
              h.env.has(e.name) || OTHER_ENV.has(e.name),
              `${owner}: agentd ${command} reads no ${e.name}`,
            );
          const listen = args[args.indexOf("--listen") + 1] ?? "";
          const port = Number(listen.split(":").at(-1));
          assert.ok(port > 0, `${owner}: --listen HOST:PORT`);
          const ports = new Map((c.ports as Obj[]).map((p) => [p.name, p.containerPort]));
          for (const [probe, path] of [
            ["readinessProbe", "/readyz"],
            ["livenessProbe", "/healthz"],
          ] as const) {
            const g = c[probe]?.httpGet;
            assert.equal(g?.path, path, `${owner}: ${probe}`);
            assert.equal(
              ports.get(g.port),
              port,
              `${owner}: ${probe} on the port agentd listens on`,
            );
          }
          assert.equal(
            Number(annotations["prometheus.io/port"]),
            port,
            `${owner}: scraped where /metrics is`,
          );
          assert.equal(c.securityContext?.readOnlyRootFilesystem, true, `${owner}: read-only root`);
          assert.equal(
            c.securityContext?.runAsNonRoot ?? spec.securityContext?.runAsNonRoot,
            true,
            `${owner}: non-root`,
          );
        }
      }
      const worker = podSpecs(objs).find((p) => p.owner === "Deployment/agentd-worker");
      assert.ok(worker, "the worker Deployment");
      // A native sidecar: up before the worker, stopped after it (the drain keeps its engine).
      const dind = ((worker.spec.initContainers ?? []) as Obj[]).find((c) => c.name === "dind");
      assert.equal(dind?.restartPolicy, "Always", "dind is a native sidecar");
      assert.equal(
        dind?.securityContext?.privileged,
        true,
        "the dind sidecar is privileged, and says so",
      );
      assert.ok(worker?.spec.terminationGracePeriodSeconds >= 60, "time to drain");
    });

    // Allowlist runs (docs/kubernetes.md, "Egress"): the proxy listens on a run network's
    // gateway and the firewall matches its bridge, both in dind's network namespace; the
    // image's iptables (file capabilities) acts only with NET_ADMIN and NET_RAW in the
    // bounding set and without no_new_privs. Never applied to an API server here.
    it("the worker can enforce allowlist egress: dind's network namespace, iptables' capabilities", () => {
      const worker = podSpecs(objs).find((p) => p.owner === "Deployment/agentd-worker");
      assert.ok(worker, "the worker Deployment");
      assert.notEqual(
        worker.spec.hostNetwork,
        true,
        "the pod's own network namespace (hostNetwork would put dind's bridges on the node)",
      );
      const dind = ((worker.spec.initContainers ?? []) as Obj[]).find((c) => c.name === "dind");
      assert.equal(dind?.restartPolicy, "Always", "dind runs beside the worker, in its pod");
      const c = (worker.spec.containers as Obj[]).find((x) => x.name === "worker");
      assert.ok(c, "the worker container");
      const env = new Map(((c.env ?? []) as Obj[]).map((e) => [e.name, e.value]));
      assert.equal(
        env.get("DOCKER_HOST"),
        "tcp://127.0.0.1:2376",
        "the engine on the pod's loopback: the namespace the worker shares",
      );
      const mode = env.get("AGENTD_IPTABLES_MODE");
      assert.ok(
        mode === undefined || ["nft", "legacy"].includes(mode),
        `AGENTD_IPTABLES_MODE ${mode}`,
      );
      const sc = c.securityContext ?? {};
      assert.deepEqual(sc.capabilities?.drop, ["ALL"], "every other capability dropped");
      assert.deepEqual(
        [...(sc.capabilities?.add ?? [])].sort(),
        ["NET_ADMIN", "NET_RAW"],
        "NET_ADMIN and NET_RAW for iptables, nothing else",
      );
      assert.equal(
        sc.allowPrivilegeEscalation,
        true,
        "file capabilities count only without no_new_privs",
      );
      assert.notEqual(sc.privileged, true, "the worker is not privileged");
      assert.equal(sc.runAsUser, 10001, "as user 10001");
    });

    it("Redis: maxmemory under its limit with noeviction, protected mode, the password from the Secret, on no command line", () => {
      const redis = podSpecs(objs).find((p) => p.owner === "StatefulSet/redis");
      assert.ok(redis, "the Redis StatefulSet");
      const c = (redis.spec.containers as Obj[]).find((x) => x.name === "redis");
      const script = [...(c.command ?? []), ...(c.args ?? [])].join(" ");
      const maxmemory = /--maxmemory (\d+)mb/.exec(script)?.[1];
      assert.ok(maxmemory !== undefined, "maxmemory is set");
      const limit = /^(\d+)Gi$/.exec(String(c.resources?.limits?.memory))?.[1];
      assert.ok(
        Number(maxmemory) * 1024 ** 2 < Number(limit) * 1024 ** 3,
        `maxmemory ${maxmemory}mb under the ${limit}Gi limit`,
      );
      assert.match(script, /--maxmemory-policy noeviction/);
      assert.match(script, /--protected-mode yes/);
      assert.match(script, /user default off resetpass/);
      assert.doesNotMatch(
        script,
        /\$\(REDIS_PASSWORD\)/,
        "Kubernetes would put it on the command line",
      );
      const fromSecret = (cont: Obj, name: string) =>
        ((cont.env ?? []) as Obj[]).find((e) => e.name === name)?.valueFrom?.secretKeyRef;
      assert.deepEqual(fromSecret(c, "REDIS_PASSWORD"), { name: "agentd-redis", key: "password" });
      for (const { owner, spec } of podSpecs(objs))
        for (const cont of spec.containers as Obj[]) {
          if (!String(cont.image).startsWith("agentd:")) continue;
          const env = new Map(((cont.env ?? []) as Obj[]).map((e) => [e.name, e.value]));
          assert.match(String(env.get("AGENTD_EVENT_LOG")), /^redis:\/\/agentd@redis:6379$/, owner);
          assert.deepEqual(
            fromSecret(cont, "AGENTD_REDIS_PASSWORD"),
            {
              name: "agentd-redis",
              key: "password",
            },
            `${owner}: the password from the Secret`,
          );
        }
      const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === "agentd-redis");
      const password = Buffer.from(
        String(secret.data.password).replace(/\s+/g, ""),
        "base64",
      ).toString("utf8");
      assert.equal(
        password === OPERATOR_REDIS_PASSWORD,
        overlay === "production",
        "production has the operator's password, dev the demo one",
      );
      assert.ok(!JSON.stringify(objs.filter((o) => o.kind !== "Secret")).includes(password));
    });

    it("the policy in the ConfigMap passes agentd policy check", () => {
      const cm = objs.find(
        (o) => o.kind === "ConfigMap" && String(o.metadata.name).startsWith("agentd-policy"),
      );
      const file = join(tmp, `${overlay}-policy.yaml`);
      writeFileSync(file, cm.data["policy.yaml"]);
      const r = spawnSync(AGENTD, ["policy", "check", file], { encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    });
  });
}

it("the rendered Redis starts as rendered (agentd-redis image): its probe passes, maxmemory and noeviction hold, nobody gets in without the password", async () => {
  const objs = render("dev");
  const sts = objs.find((o) => o.kind === "StatefulSet" && o.metadata.name === "redis");
  const c = (sts.spec.template.spec.containers as Obj[]).find((x) => x.name === "redis");
  const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === "agentd-redis");
  const password = Buffer.from(String(secret.data.password).replace(/\s+/g, ""), "base64").toString(
    "utf8",
  );
  const name = `agentd-k8s-redis-${process.pid}`;
  const [entry, ...rest] = c.command as string[];
  const run = spawnSync(
    "docker",
    [
      "run",
      "-d",
      "--rm",
      "--name",
      name,
      "-v",
      "/data",
      "-e",
      `REDIS_PASSWORD=${password}`,
      "--entrypoint",
      entry as string,
      "agentd-redis:latest",
      ...rest,
      ...(c.args as string[]),
    ],
    { encoding: "utf8" },
  );
  assert.equal(run.status, 0, run.stderr);
  try {
    const exec = (...args: string[]) =>
      spawnSync("docker", ["exec", name, ...args], { encoding: "utf8", timeout: 60_000 });
    const probe = c.readinessProbe.exec.command as string[];
    await until("Redis's readiness probe passes", () => exec(...probe).status === 0, {
      everyMs: 250,
      detail: () => spawnSync("docker", ["logs", name], { encoding: "utf8" }).stdout,
    });
    const authed = exec(
      "sh",
      "-c",
      'redis-cli --user agentd --pass "$REDIS_PASSWORD" --no-auth-warning info memory',
    ).stdout;
    assert.match(authed, /^maxmemory:805306368\r?$/m, "maxmemory 768mb");
    assert.match(authed, /^maxmemory_policy:noeviction\r?$/m);
    assert.match(exec("redis-cli", "ping").stdout, /NOAUTH/, "no way in without the password");
  } finally {
    spawnSync("docker", ["rm", "-f", name]);
  }
});

it("production does not render without the operator's auth.yaml; the demo token never reaches it", () => {
  const bare = spawnSync(
    "kubectl",
    ["kustomize", join(ROOT, "deploy", "kubernetes", "overlays", "production")],
    {
      encoding: "utf8",
    },
  );
  assert.notEqual(bare.status, 0, "rendered without an auth.yaml");
  const demo = /sha256: ([0-9a-f]{64})/.exec(
    readFileSync(join(ROOT, "deploy", "kubernetes", "base", "auth.example.yaml"), "utf8"),
  )?.[1] as string;
  const secret = render("production").find(
    (o) => o.kind === "Secret" && o.metadata.name === "agentd-auth",
  );
  const auth = Buffer.from(String(secret.data["auth.yaml"]).replace(/\s+/g, ""), "base64").toString(
    "utf8",
  );
  assert.ok(
    auth.includes(OPERATOR_TOKEN_SHA) && !auth.includes(demo),
    "the operator's tokens only",
  );
  const dev = render("dev").find((o) => o.kind === "Secret" && o.metadata.name === "agentd-auth");
  const devAuth = Buffer.from(String(dev.data["auth.yaml"]).replace(/\s+/g, ""), "base64").toString(
    "utf8",
  );
  assert.doesNotMatch(devAuth, /admin/, "the demo token has no admin role");
});

it("the base's policy is the repository's policy.yaml", () => {
  assert.equal(
    readFileSync(join(ROOT, "deploy", "kubernetes", "base", "policy.yaml"), "utf8"),
    readFileSync(join(ROOT, "policy.yaml"), "utf8"),
    "deploy/kubernetes/base/policy.yaml differs: copy policy.yaml there",
  );
});

// Not caught: an unknown field (the OpenAPI schemas allow additional properties; the API
// server drops or refuses them by its field validation setting). docs/kubernetes.md says so.
it("the validator refuses what the API server would (a port as text, a missing container name)", async () => {
  const { Deployment } = await import("kubernetes-models/apps/v1/Deployment");
  const d = render(OVERLAYS[0] as string).find((o) => o.kind === "Deployment");
  const broken = structuredClone(d);
  broken.spec.template.spec.containers[0].ports[0].containerPort = "7070";
  assert.throws(() => new Deployment(broken).validate(), /containerPort must be integer/);
  const nameless = structuredClone(d);
  delete nameless.spec.template.spec.containers[0].name;
  assert.throws(() => new Deployment(nameless).validate(), /must have required property name/);
});
