/**
 * The server name a TLS ClientHello asks for (the SNI extension), read from the first bytes
 * a client sends through a CONNECT tunnel, so the egress proxy can check that the tunnel
 * carries TLS for the host it was opened to. Parses only what it needs and bounds every
 * length by the bytes it has. Must never: throw on hostile bytes (it answers a reason).
 */

export type SniResult =
  | { kind: "sni"; name: string }
  | { kind: "need-more" }
  | { kind: "not-tls"; reason: string };

/** Largest ClientHello looked at (a record is at most 16 KiB + header). */
export const MAX_HELLO_BYTES = 16 * 1024 + 5;

export function readSni(buf: Buffer): SniResult {
  if (buf.length < 5) return { kind: "need-more" };
  if (buf[0] !== 0x16) return { kind: "not-tls", reason: "not a TLS handshake record" };
  const recordLen = buf.readUInt16BE(3);
  if (recordLen > MAX_HELLO_BYTES - 5) return { kind: "not-tls", reason: "record too long" };
  if (buf.length < 5 + recordLen) return { kind: "need-more" };
  const r = new Reader(buf.subarray(5, 5 + recordLen));
  try {
    if (r.u8() !== 0x01) return { kind: "not-tls", reason: "not a ClientHello" };
    r.skip(3); // handshake length
    r.skip(2 + 32); // version, random
    r.skip(r.u8()); // session id
    r.skip(r.u16()); // cipher suites
    r.skip(r.u8()); // compression methods
    if (r.left() === 0) return { kind: "not-tls", reason: "no extensions (no server name)" };
    const ext = new Reader(r.take(r.u16()));
    while (ext.left() > 0) {
      const type = ext.u16();
      const body = new Reader(ext.take(ext.u16()));
      if (type !== 0) continue;
      const list = new Reader(body.take(body.u16()));
      while (list.left() > 0) {
        const nameType = list.u8();
        const name = list.take(list.u16());
        if (nameType === 0) return { kind: "sni", name: name.toString("latin1").toLowerCase() };
      }
    }
    return { kind: "not-tls", reason: "no server name in the ClientHello" };
  } catch {
    return { kind: "not-tls", reason: "a malformed ClientHello" };
  }
}

class Reader {
  #at = 0;
  readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  left(): number {
    return this.buf.length - this.#at;
  }
  u8(): number {
    return this.take(1)[0] as number;
  }
  u16(): number {
    return this.take(2).readUInt16BE(0);
  }
  skip(n: number): void {
    this.take(n);
  }
  take(n: number): Buffer {
    if (n > this.left()) throw new RangeError("short");
    const out = this.buf.subarray(this.#at, this.#at + n);
    this.#at += n;
    return out;
  }
}
