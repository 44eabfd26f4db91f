/**
 * Hostile destinations against the egress rules: spellings of internal addresses (IPv4
 * hidden in IPv6, metadata, shorthand that DNS resolves to loopback), wildcard edges, ports,
 * malformed rules. No network: addresses are given as a resolver would return them.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { describe, it } from "node:test";
import {
  checkDestination,
  classifyAddress,
  embeddedIpv4,
  type HostRule,
  matchRule,
  parseHostRule,
} from "./destination.ts";

const rules = (...entries: string[]): HostRule[] =>
  entries.map((e) => {
    const r = parseHostRule(e);
    assert.ok(!("error" in r), `${e}: ${"error" in r ? r.error : ""}`);
    return r;
  });

describe("parseHostRule", () => {
  it("exact names and *. suffixes, with optional ports, normalized", () => {
    assert.deepEqual(parseHostRule("Registry.NPMJS.org."), {
      host: "registry.npmjs.org",
      wildcard: false,
      port: undefined,
      text: "Registry.NPMJS.org.",
    });
    const w = parseHostRule("*.pythonhosted.org:443");
    assert.ok(!("error" in w) && w.wildcard && w.host === "pythonhosted.org" && w.port === 443);
  });

  it("refuses malformed, too broad, IP and port-out-of-range entries, each with a reason", () => {
    for (const [entry, why] of [
      ["*.com", /too broad/],
      ["*", /not a host name/],
      ["*.*.example.com", /not a host name/],
      ["exa mple.com", /not a host name/],
      ["-bad.example.com", /not a host name/],
      ["example.com:0", /port 0/],
      ["example.com:70000", /port 70000/],
      ["10.0.0.1", /IP address/],
      ["169.254.169.254:80", /IP address/],
      ["[::1]:443", /IP address/],
      ["127.1", /ends in a number/],
      ["", /not a host name/],
      [`${"a".repeat(64)}.com`, /not a host name/],
    ] as const) {
      const r = parseHostRule(entry);
      assert.ok("error" in r, `${entry} accepted`);
      assert.match(r.error, why, entry);
    }
  });
});

describe("matchRule", () => {
  const r = rules("registry.npmjs.org", "*.pythonhosted.org", "api.github.com:443");
  it("matches whole labels only, case and trailing dot ignored, ports when given", () => {
    assert.equal(matchRule(r, "REGISTRY.npmjs.org.", 443)?.text, "registry.npmjs.org");
    assert.equal(matchRule(r, "files.pythonhosted.org", 443)?.text, "*.pythonhosted.org");
    assert.equal(matchRule(r, "a.b.pythonhosted.org", 80)?.text, "*.pythonhosted.org");
    assert.equal(matchRule(r, "pythonhosted.org", 443), undefined, "the suffix itself is not *.");
    assert.equal(matchRule(r, "evilpythonhosted.org", 443), undefined, "a partial label");
    assert.equal(matchRule(r, "registry.npmjs.org.evil.com", 443), undefined);
    assert.equal(matchRule(r, "api.github.com", 22), undefined, "another port");
    assert.equal(matchRule(r, "api.github.com", 443)?.text, "api.github.com:443");
  });
});

describe("classifyAddress", () => {
  it("internal addresses in every spelling a resolver returns", () => {
    for (const [ip, cls] of [
      ["8.8.8.8", "public"],
      ["2606:4700:4700::1111", "public"],
      ["127.0.0.1", "loopback"],
      ["127.255.255.254", "loopback"],
      ["::1", "loopback"],
      ["0.0.0.0", "unspecified"],
      ["::", "unspecified"],
      ["10.1.2.3", "private"],
      ["172.31.255.255", "private"],
      ["172.32.0.1", "public"],
      ["192.168.1.1", "private"],
      ["100.100.100.200", "private"],
      ["fd12:3456::1", "private"],
      ["169.254.169.254", "metadata"],
      ["fd00:ec2::254", "metadata"],
      ["169.254.1.1", "link-local"],
      ["fe80::1", "link-local"],
      ["224.0.0.1", "multicast"],
      ["::ffff:127.0.0.1", "loopback"],
      ["::ffff:7f00:1", "loopback"],
      ["::ffff:169.254.169.254", "metadata"],
      ["::ffff:a9fe:a9fe", "metadata"],
      ["64:ff9b::a9fe:a9fe", "metadata"],
      ["64:ff9b::10.0.0.1", "private"],
      ["2002:7f00:1::", "loopback"],
      ["::127.0.0.1", "loopback"],
      ["not-an-ip", "reserved"],
    ] as const)
      assert.equal(classifyAddress(ip), cls, ip);
    assert.equal(embeddedIpv4("2001:4860::8888"), undefined);
  });
});

describe("checkDestination", () => {
  const c = { rules: rules("registry.npmjs.org", "*.internal.example.com") };
  it("an allowed name that resolves to a public address passes, naming the rule", () => {
    const v = checkDestination(c, "registry.npmjs.org", 443, [
      "104.16.1.34",
      "2606:4700::6810:122",
    ]);
    assert.ok(v.ok && v.rule.text === "registry.npmjs.org");
  });
  it("an allowed name that resolves (even partly) inside is refused: DNS is no way in", () => {
    for (const addrs of [["10.0.0.5"], ["104.16.1.34", "169.254.169.254"], ["::ffff:127.0.0.1"]]) {
      const v = checkDestination(c, "registry.npmjs.org", 443, addrs);
      assert.ok(!v.ok && /a (private|metadata|loopback) address/.test(v.reason), addrs.join());
    }
    const none = checkDestination(c, "registry.npmjs.org", 443, []);
    assert.ok(!none.ok && /did not resolve/.test(none.reason));
  });
  it("a name outside the allowlist is refused whatever it resolves to", () => {
    const v = checkDestination(c, "evil.com", 443, ["93.184.216.34"]);
    assert.ok(!v.ok && /not in the policy's network.allow/.test(v.reason));
  });
  it("private addresses the policy names are allowed, others are not", () => {
    const privateAllowed = new net.BlockList();
    privateAllowed.addSubnet("10.20.0.0", 16, "ipv4");
    const p = { ...c, privateAllowed };
    assert.ok(checkDestination(p, "db.internal.example.com", 5432, ["10.20.3.4"]).ok);
    assert.ok(checkDestination(p, "db.internal.example.com", 5432, ["::ffff:10.20.3.4"]).ok);
    assert.ok(!checkDestination(p, "db.internal.example.com", 5432, ["10.21.0.1"]).ok);
    assert.ok(!checkDestination(p, "db.internal.example.com", 80, ["169.254.169.254"]).ok);
  });
});
