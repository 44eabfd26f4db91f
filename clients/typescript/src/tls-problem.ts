/**
 * What went wrong when a TLS connection to agentd failed, in words a person acts on: Node's
 * certificate verification codes (SELF_SIGNED_CERT_IN_CHAIN, CERT_HAS_EXPIRED,
 * ERR_TLS_CERT_ALTNAME_INVALID…) found in an error's causes. Must never: call a server-side
 * failure a certificate problem (only codes Node's TLS client sets are recognised).
 */

export interface TlsProblem {
  /** Node's code, e.g. SELF_SIGNED_CERT_IN_CHAIN. */
  code: string;
  /** What it means, e.g. "certificate signed by an unknown authority". */
  text: string;
  /** A private CA would fix it: tell the caller to trust one (a CA file, NODE_EXTRA_CA_CERTS). */
  untrusted: boolean;
}

const UNKNOWN_AUTHORITY = "certificate signed by an unknown authority";

const PROBLEMS: Record<string, { text: string; untrusted: boolean }> = {
  SELF_SIGNED_CERT_IN_CHAIN: { text: UNKNOWN_AUTHORITY, untrusted: true },
  DEPTH_ZERO_SELF_SIGNED_CERT: { text: "self-signed certificate", untrusted: true },
  UNABLE_TO_GET_ISSUER_CERT: { text: UNKNOWN_AUTHORITY, untrusted: true },
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: { text: UNKNOWN_AUTHORITY, untrusted: true },
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: { text: UNKNOWN_AUTHORITY, untrusted: true },
  CERT_UNTRUSTED: { text: UNKNOWN_AUTHORITY, untrusted: true },
  CERT_HAS_EXPIRED: { text: "the server's certificate has expired", untrusted: false },
  CERT_NOT_YET_VALID: { text: "the server's certificate is not valid yet", untrusted: false },
  CERT_REVOKED: { text: "the server's certificate was revoked", untrusted: false },
  ERR_TLS_CERT_ALTNAME_INVALID: {
    text: "the server's certificate is not for this host name",
    untrusted: false,
  },
  ERR_SSL_WRONG_VERSION_NUMBER: {
    text: "no TLS at this address (is it an http:// server?)",
    untrusted: false,
  },
  ERR_SSL_PACKET_LENGTH_TOO_LONG: {
    text: "no TLS at this address (is it an http:// server?)",
    untrusted: false,
  },
};

/** The TLS problem somewhere in `err`'s causes, if any. */
export function tlsProblem(err: unknown): TlsProblem | undefined {
  let e: unknown = err;
  for (let i = 0; i < 8 && e instanceof Error; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && Object.hasOwn(PROBLEMS, code)) {
      const p = PROBLEMS[code] as { text: string; untrusted: boolean };
      return { code, ...p };
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
