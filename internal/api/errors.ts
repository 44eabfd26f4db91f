/**
 * The one place internal errors become RPC errors. Codes map to gRPC codes; validation
 * errors carry a google.rpc.BadRequest naming the field. Internal failures never leak
 * their message to the client: they are logged with an id the client gets instead.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ulid } from "ulid";
import { AgentdError, type ErrorCode } from "../errors.ts";
import { BadRequestSchema } from "../gen/google/rpc/error_details_pb.js";

const CODES: Record<ErrorCode, Code> = {
  EVALIDATION: Code.InvalidArgument,
  EPERMISSION: Code.PermissionDenied,
  EUNAUTHENTICATED: Code.Unauthenticated,
  ENOTFOUND: Code.NotFound,
  ECONFLICT: Code.FailedPrecondition,
  EFENCED: Code.FailedPrecondition,
  EENDED: Code.FailedPrecondition,
  EOUTOFRANGE: Code.OutOfRange,
  ETOOLARGE: Code.ResourceExhausted,
  ETIMEOUT: Code.DeadlineExceeded,
  EUNAVAILABLE: Code.Unavailable,
  EUNIMPLEMENTED: Code.Unimplemented,
  EPOLICY: Code.PermissionDenied,
  ESECRET_NOT_FOUND: Code.FailedPrecondition,
  EIO: Code.Internal,
};

/** Logs an internal failure; the logger is set by the composition root. */
export type ErrorLogger = (err: unknown, incidentId: string) => void;

export function toConnectError(err: unknown, logError?: ErrorLogger): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof AgentdError && err.code !== "EIO") {
    const details =
      err.field === undefined
        ? []
        : [
            {
              desc: BadRequestSchema,
              value: {
                fieldViolations: [{ field: err.field, description: err.message, reason: err.code }],
              },
            },
          ];
    return new ConnectError(err.message, CODES[err.code], undefined, details, err);
  }
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
