/**
 * Where a sandbox may connect (issue #16's egress proxy decides with this): host rules from
 * the policy's allowlist — exact names and `*.` suffixes, each with an optional port — and
 * the class of every address a name resolves to. A name the rules allow is still refused
 * when it resolves to a loopback, private, link-local, metadata or otherwise non-public
 * address, unless the policy names that address explicitly (private: …). IPv4 hidden in
 * IPv6 (mapped, NAT64, 6to4) is classified as the IPv4 address it carries. Pure: no I/O.
 * Must never: allow a destination because of how it was spelled (case, a trailing dot, an
 * IP in another notation), or by a rule that matched only part of a label.
 */
import net from "node:net";

export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "link-local"
  | "metadata"
  | "unspecified"
  | "multicast"
  | "reserved";

export interface HostRule {
  /** Lowercase name without a trailing dot; for a wildcard, the suffix after "*.". */
  host: string;
  wildcard: boolean;
  /** undefined: any port. */
  port: number | undefined;
  /** The entry as written, for decisions and errors. */
  text: string;
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** An allowlist entry ("registry.npmjs.org", "*.pythonhosted.org", "api.github.com:443"), or why it is not one. */
export function parseHostRule(entry: string): HostRule | { error: string } {
  const text = entry.trim();
  const m = /^(.*?)(?::(\d{1,5}))?$/.exec(text);
  const name = (m?.[1] ?? "").toLowerCase().replace(/\.$/, "");
  const port = m?.[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535))
    return { error: `port ${port} is not 1..65535` };
  if (net.isIP(name) !== 0 || name.startsWith("["))
    return {
      error:
        "an IP address is not a host rule: name it under network.private with the reason it is needed",
    };
  const wildcard = name.startsWith("*.");
  const host = wildcard ? name.slice(2) : name;
  const labels = host.split(".");
  if (host.length === 0 || host.length > 253 || !labels.every((l) => LABEL.test(l)))
    return {
      error: `${JSON.stringify(entry)} is not a host name (letters, digits and hyphens, labels joined by dots; "*." only in front)`,
    };
  if (wildcard && labels.length < 2)
    return {
      error: `${JSON.stringify(entry)} is too broad: a wildcard needs at least two labels after "*." (e.g. *.pythonhosted.org)`,
    };
  if (/^\d+$/.test(labels.at(-1) as string))
    return {
      error: `${JSON.stringify(entry)} ends in a number: not a host name (IP addresses go under network.private)`,
    };
  return { host, wildcard, port, text };
}

/** The rule that allows `host:port`, if any (the name normalized: lowercase, no trailing dot). */
export function matchRule(
  rules: readonly HostRule[],
  host: string,
  port: number,
): HostRule | undefined {
  const name = host.toLowerCase().replace(/\.$/, "");
  return rules.find((r) => {
    if (r.port !== undefined && r.port !== port) return false;
    return r.wildcard ? name.endsWith(`.${r.host}`) : name === r.host;
  });
}

const V4: [string, number, AddressClass][] = [
  ["0.0.0.0", 8, "unspecified"],
  ["127.0.0.0", 8, "loopback"],
  ["10.0.0.0", 8, "private"],
  ["172.16.0.0", 12, "private"],
  ["192.168.0.0", 16, "private"],
  ["100.64.0.0", 10, "private"], // carrier-grade NAT
  ["169.254.169.254", 32, "metadata"], // cloud metadata, before its link-local range
  ["169.254.0.0", 16, "link-local"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "reserved"],
  ["198.18.0.0", 15, "reserved"],
  ["198.51.100.0", 24, "reserved"],
  ["203.0.113.0", 24, "reserved"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"],
];
const V6: [string, number, AddressClass][] = [
  ["::", 128, "unspecified"],
  ["::1", 128, "loopback"],
  ["fd00:ec2::254", 128, "metadata"], // AWS's IPv6 metadata address
  ["fc00::", 7, "private"],
  ["fe80::", 10, "link-local"],
  ["ff00::", 8, "multicast"],
  ["2001:db8::", 32, "reserved"],
];

const lists = new Map<AddressClass, net.BlockList>();
for (const [addr, prefix, cls] of V4) add(cls, addr, prefix, "ipv4");
for (const [addr, prefix, cls] of V6) add(cls, addr, prefix, "ipv6");
function add(cls: AddressClass, addr: string, prefix: number, type: "ipv4" | "ipv6"): void {
  let l = lists.get(cls);
  if (l === undefined) {
    l = new net.BlockList();
    lists.set(cls, l);
  }
  l.addSubnet(addr, prefix, type);
}
const ORDER: AddressClass[] = [
  "metadata",
  "unspecified",
  "loopback",
  "link-local",
  "private",
  "multicast",
  "reserved",
];

/** The class of an IP address (IPv4 carried in IPv6 is classified as that IPv4). */
export function classifyAddress(ip: string): AddressClass {
  const v4 = embeddedIpv4(ip);
  const [addr, type] =
    v4 !== undefined
      ? [v4, "ipv4" as const]
      : [ip, net.isIPv6(ip) ? ("ipv6" as const) : ("ipv4" as const)];
  if (net.isIP(addr) === 0) return "reserved";
  for (const cls of ORDER) if (lists.get(cls)?.check(addr, type)) return cls;
  return "public";
}

/** The IPv4 address inside an IPv6 one (::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::/96, 2002::/16), if any. */
export function embeddedIpv4(ip: string): string | undefined {
  if (!net.isIPv6(ip)) return undefined;
  const words = expandIpv6(ip);
  const tail = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  if (zero(0, 5) && words[5] === 0xffff) return tail(words[6] as number, words[7] as number); // mapped
  if (zero(0, 6) && (words[6] !== 0 || (words[7] as number) > 1))
    return tail(words[6] as number, words[7] as number); // compatible
  if (words[0] === 0x64 && words[1] === 0xff9b && zero(2, 6))
    return tail(words[6] as number, words[7] as number); // NAT64
  if (words[0] === 0x2002) return tail(words[1] as number, words[2] as number); // 6to4
  return undefined;
}

/** The eight 16-bit words of an IPv6 address (with an IPv4 tail converted). */
function expandIpv6(ip: string): number[] {
  let s = ip.toLowerCase().replace(/%.*$/, "");
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s)?.[1];
  if (v4 !== undefined) {
    const [a, b, c, d] = v4.split(".").map(Number) as [number, number, number, number];
    s = `${s.slice(0, -v4.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = s.split("::") as [string, string | undefined];
  const h = head === "" ? [] : head.split(":");
  const t = rest === undefined ? [] : rest === "" ? [] : rest.split(":");
  const fill = rest === undefined ? [] : new Array(8 - h.length - t.length).fill("0");
  return [...h, ...fill, ...t].map((w) => Number.parseInt(w, 16));
}

export interface DestinationCheck {
  rules: readonly HostRule[];
  /** Addresses and subnets the policy allows although they are not public. */
  privateAllowed?: net.BlockList;
}

export type Verdict =
  | { ok: true; rule: HostRule }
  | { ok: false; reason: string; class?: AddressClass };

/**
 * May a sandbox connect to `host:port`, which resolved to `addresses`? The name must match
 * a rule, and every address must be public or allowed by name (a name that resolves to a
 * private address would otherwise reach the cluster by way of DNS).
 */
export function checkDestination(
  c: DestinationCheck,
  host: string,
  port: number,
  addresses: readonly string[],
): Verdict {
  const rule = matchRule(c.rules, host, port);
  if (rule === undefined)
    return { ok: false, reason: `${host}:${port} is not in the policy's network.allow` };
  if (addresses.length === 0) return { ok: false, reason: `${host} did not resolve` };
  for (const a of addresses) {
    const cls = classifyAddress(a);
    if (cls === "public") continue;
    const v4 = embeddedIpv4(a);
    const [addr, type] =
      v4 !== undefined
        ? [v4, "ipv4" as const]
        : [a, net.isIPv6(a) ? ("ipv6" as const) : ("ipv4" as const)];
    if (c.privateAllowed?.check(addr, type)) continue;
    return {
      ok: false,
      reason: `${host} resolves to ${a}, a ${cls} address the policy does not name`,
      class: cls,
    };
  }
  return { ok: true, rule };
}
