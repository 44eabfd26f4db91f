/**
 * The policy's `network` section (issue #16): the hosts a sandbox may reach through the
 * egress proxy, the addresses allowed although not public, when a host outside the list
 * asks a person, and credentials the proxy adds (values from `$ENV.NAME`, never written in
 * the policy). Every entry is checked here, errors naming the field and the entry, so a
 * typo fails at load, not at the first connection. Enforced for runs whose policy says
 * sandbox.network: allowlist (internal/egress/run-egress.ts); with sandbox.network: none
 * the section is validated and the sandbox has no network at all.
 */
import net from "node:net";
import { z } from "zod";
import { parseHostRule } from "../egress/destination.ts";
import { isPresetName, PRESET_NAMES } from "./network-presets.ts";
import { Size } from "./policy-units.ts";

/** A host rule (parseHostRule): exact name or "*." suffix, optional ":port". */
export const HostEntry = z.string().superRefine((entry, ctx) => {
  const r = parseHostRule(entry);
  if ("error" in r) ctx.addIssue({ code: "custom", message: r.error });
});

/** An IP address or a subnet (CIDR) the policy allows although it is not public. */
const PrivateEntry = z.string().superRefine((entry, ctx) => {
  const [addr, prefix, ...rest] = entry.trim().split("/");
  const family = net.isIP(addr ?? "");
  const max = family === 6 ? 128 : 32;
  const bits = prefix === undefined ? max : Number(prefix);
  if (family === 0 || rest.length > 0 || !Number.isInteger(bits) || bits < 0 || bits > max)
    ctx.addIssue({
      code: "custom",
      message: `${JSON.stringify(entry)} is not an IP address or subnet (10.20.0.0/16, fd00::/8, 10.1.2.3)`,
    });
  else if (bits < 8)
    ctx.addIssue({ code: "custom", message: `${JSON.stringify(entry)} is too wide: at most a /8` });
});

const HEADER_RE = /^[A-Za-z0-9-]{1,64}$/;
const ENV_REF = /\$ENV\.[A-Za-z_][A-Za-z0-9_]*/;

const Credential = z
  .object({
    /** The exact host the header is added for (it must also be allowed). */
    host: HostEntry,
    header: z.string().regex(HEADER_RE, "must be a header name"),
    /** The value, with `$ENV.NAME` where the secret goes (e.g. "Bearer $ENV.GITHUB_TOKEN"). */
    value: z
      .string()
      .min(1)
      .max(4096)
      .refine(
        (v) => ENV_REF.test(v),
        "must name its secret as $ENV.NAME (a literal secret would sit in the policy)",
      ),
  })
  .strict();

export const NetworkSchema = z
  .object({
    /** Hosts a sandbox may reach: exact names and "*." suffixes, each with an optional ":port". */
    allow: z.array(HostEntry).max(256).default([]),
    /**
     * Registry presets (network-presets.ts): each adds its registry's hosts (port 443) to
     * `allow`. Needs sandbox.network: allowlist (policy-schema.ts).
     */
    presets: z
      .array(
        z.string().refine((n): boolean => isPresetName(n), {
          error: (i) =>
            `${JSON.stringify(i.input)} is not a preset; known: ${PRESET_NAMES.join(", ")}`,
        }),
      )
      .max(PRESET_NAMES.length * 2)
      .default([]),
    /** Addresses and subnets allowed although loopback, private or link-local. */
    private: z.array(PrivateEntry).max(64).default([]),
    /** A host outside `allow`: refused (never), or it waits for a person (risk, always). */
    approval: z.enum(["never", "risk", "always"]).default("never"),
    credentials: z.array(Credential).max(32).default([]),
    /**
     * Hosts (rules like `allow`'s) allowed without asking once people approved them this
     * many times in the repository's recent runs, and never denied them there.
     */
    trust: z
      .array(z.object({ host: HostEntry, approvals: z.number().int().min(1).max(1000) }).strict())
      .max(64)
      .default([]),
    /** Bounds of one run's egress (per drive of the run). */
    limits: z
      .object({
        /** Connections open at once. */
        concurrent: z.number().int().min(1).max(4096).default(64),
        /** Connections in all (refused ones included). */
        connections: z.number().int().min(1).max(1_000_000).default(2000),
        /** Bytes each way of one connection. */
        connectionBytes: Size.refine((n) => n >= 1024, "must be at least 1KiB").default(1024 ** 3),
        /** Bytes in all, both ways. */
        bytes: Size.refine((n) => n >= 1024, "must be at least 1KiB").default(4 * 1024 ** 3),
      })
      .strict()
      .default({
        concurrent: 64,
        connections: 2000,
        connectionBytes: 1024 ** 3,
        bytes: 4 * 1024 ** 3,
      }),
  })
  .strict()
  .superRefine((n, ctx) => {
    n.credentials.forEach((c, i) => {
      const rule = parseHostRule(c.host);
      if (!("error" in rule) && rule.wildcard)
        ctx.addIssue({
          code: "custom",
          path: ["credentials", i, "host"],
          message: "credentials go to one exact host, not a wildcard",
        });
      const allowed = n.allow.some((a) => {
        const r = parseHostRule(a);
        return (
          !("error" in r) &&
          !("error" in rule) &&
          (r.wildcard ? rule.host.endsWith(`.${r.host}`) : r.host === rule.host)
        );
      });
      if (!allowed)
        ctx.addIssue({
          code: "custom",
          path: ["credentials", i, "host"],
          message: `${c.host} is not in network.allow`,
        });
    });
  })
  .default({
    allow: [],
    presets: [],
    private: [],
    approval: "never",
    credentials: [],
    trust: [],
    limits: { concurrent: 64, connections: 2000, connectionBytes: 1024 ** 3, bytes: 4 * 1024 ** 3 },
  });

export type NetworkPolicy = z.infer<typeof NetworkSchema>;
