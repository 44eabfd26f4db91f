/**
 * A new approval's id and expiry, the same for every kind of approval (a risky call's in
 * the kernel, a network host's in the driver): `apr_<run id>_<ulid>`, and `expires_at`
 * when the policy's approvals.expireAfter is set. Must never: reuse an id.
 */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ulid } from "ulid";

export function approvalTicket(
  runId: string,
  nowMs: number,
  expireAfterMs: number | undefined,
): { approvalId: string; expiresAt?: Timestamp } {
  return {
    approvalId: `apr_${runId}_${ulid(nowMs)}`,
    ...(expireAfterMs === undefined ? {} : { expiresAt: timestampFromMs(nowMs + expireAfterMs) }),
  };
}
