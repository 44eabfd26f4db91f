/**
 * Call ids come from the model and go into every event of a call and back to the model.
 * A huge id, or one with control characters or lone surrogates, would make events too large
 * or undecodable: such an id is replaced by a short stable one derived from it. The model
 * sees the replacement in its history (rebuilt from the log), so the pairing of calls and
 * results holds. Must never: let a model-chosen string of any size into an id field.
 */
import { createHash } from "node:crypto";

const SAFE_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

export function safeCallId(id: string): string {
  if (SAFE_ID.test(id)) return id;
  return `call_${createHash("sha256").update(id.toWellFormed()).digest("hex").slice(0, 24)}`;
}
