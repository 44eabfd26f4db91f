/**
 * The one place internal errors become RPC errors. Codes map to gRPC codes; validation
 * errors carry a google.rpc.BadRequest naming the field. Internal failures never leak
 * their message to the client: they are logged with an id the client gets instead. Every
 * message that does reach a client is scrubbed of what only the server should see (script
 * hashes, stack frames, host paths, addresses), as a last line behind the adapters' own
 * client-safe messages.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ulid } from "ulid";
import { AgentdError, type ErrorCode } from "../errors.ts";
import { BadRequestSchema } from "../gen/google/rpc/error_details_pb.js";
import { scrubMessage } from "./scrub.ts";

const CODES: Record<ErrorCode, Code> = {
  EVALIDATION: Code.InvalidArgument,
  EPERMISSION: Code.PermissionDenied,
  EUNAUTHENTICATED: Code.Unauthenticated,
  ENOTFOUND: Code.NotFound,
  ECONFLICT: Code.FailedPrecondition,
  EEXISTS: Code.AlreadyExists,
  EFENCED: Code.FailedPrecondition,
  EENDED: Code.FailedPrecondition,
  EOUTOFRANGE: Code.OutOfRange,
  ETOOLARGE: Code.ResourceExhausted,
  EBUSY: Code.ResourceExhausted,
  ETIMEOUT: Code.DeadlineExceeded,
  EUNAVAILABLE: Code.Unavailable,
  EUNIMPLEMENTED: Code.Unimplemented,
  EPOLICY: Code.PermissionDenied,
  ESECRET_NOT_FOUND: Code.FailedPrecondition,
  ECANCELLED: Code.FailedPrecondition,
  // The stored log is behind what the client (or a writer) saw: a client must drop what it
  // holds past the stored head and read the run again (docs/api.md, "Resync").
  EREWOUND: Code.DataLoss,
  ELIMIT_ARTIFACTS: Code.ResourceExhausted,
  EIO: Code.Internal,
};

/**
 * Codes that say a dependency failed: their messages come from adapters, so the client
 * also gets an incident id, and the whole error (cause included) goes to the log.
 */
const DEPENDENCY_CODES: ReadonlySet<ErrorCode> = new Set(["EUNAVAILABLE", "ETIMEOUT"]);

const INCIDENT_RE = /^internal error \(incident [0-9A-HJKMNP-TV-Z]{26}\)$/;

/** Logs an internal failure; the logger is set by the composition root. */
export type ErrorLogger = (err: unknown, incidentId: string) => void;

export function toConnectError(err: unknown, logError?: ErrorLogger): ConnectError {
  if (err instanceof ConnectError) return clientSafe(err, logError);
  if (err instanceof AgentdError && err.code !== "EIO") {
    let message = scrubMessage(err.message);
    if (DEPENDENCY_CODES.has(err.code)) {
      const incident = ulid();
      logError?.(err, incident);
      message = `${message} (incident ${incident})`;
    }
    const details =
      err.field === undefined
        ? []
        : [
            {
              desc: BadRequestSchema,
              value: {
                fieldViolations: [{ field: err.field, description: message, reason: err.code }],
              },
            },
          ];
    return new ConnectError(message, CODES[err.code], undefined, details, err);
  }
  return internal(err, logError);
}

/**
 * A ConnectError as a client may see it: an internal one without an incident id (raised
 * by connect itself, or by a handler that built its own) becomes one with an id, logged;
 * a request body connect could not decode becomes INVALID_ARGUMENT (see interceptors/edge-errors.ts);
 * any other message is scrubbed.
 */
export function clientSafe(err: ConnectError, logError?: ErrorLogger): ConnectError {
  const decode = decodeFailure(err);
  if (decode !== undefined) return decode;
  if (err.code === Code.Internal) {
    return INCIDENT_RE.test(err.rawMessage) ? err : internal(err, logError);
  }
  const message = scrubMessage(err.rawMessage);
  if (message === err.rawMessage) return err;
  const safe = new ConnectError(message, err.code, err.metadata, undefined, err.cause ?? err);
  safe.details = err.details;
  return safe;
}

function internal(err: unknown, logError: ErrorLogger | undefined): ConnectError {
  const incident = ulid();
  logError?.(err, incident);
  return new ConnectError(
    `internal error (incident ${incident})`,
    Code.Internal,
    undefined,
    undefined,
    err,
  );
}

/**
 * connect-es answers a binary body it cannot decode with INTERNAL "parse binary: …"
 * (createBinarySerialization in @connectrpc/connect's protocol/serialization.ts): it is the
 * client's bad input, so it becomes INVALID_ARGUMENT with a plain reason. JSON failures are
 * INVALID_ARGUMENT there already; they get the same "request: …" form.
 */
function decodeFailure(err: ConnectError): ConnectError | undefined {
  const raw = err.rawMessage;
  let message: string | undefined;
  if (err.code === Code.Internal && raw.startsWith("parse binary: ")) {
    message = `the body is not a valid protobuf message (${binaryReason(raw)})`;
  } else if (err.code === Code.InvalidArgument && raw.startsWith("cannot decode ")) {
    message = `the JSON body does not match the message: ${scrubMessage(raw)}`;
  } else if (err.code === Code.InvalidArgument && /not valid for encoding utf-8/i.test(raw)) {
    message = "the JSON body is not valid UTF-8";
  }
  if (message === undefined) return undefined;
  return new ConnectError(`request: ${message}`, Code.InvalidArgument, undefined, undefined, err);
}

function binaryReason(raw: string): string {
  const why = raw.slice("parse binary: ".length);
  if (/premature EOF|index out of range/i.test(why)) return "it is truncated";
  if (/tag|wire type|end group/i.test(why)) return "a field has an invalid tag or wire type";
  if (/utf-?8/i.test(why)) return "a string field is not valid UTF-8";
  if (/recursion/i.test(why)) return "it nests too deeply";
  if (/int|float|varint|overflow/i.test(why)) return "a number field is malformed";
  return "it is malformed";
}
