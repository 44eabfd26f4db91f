/**
 * The size of a whole model request before it is sent, estimated in tokens: the system
 * prompt, every message (tool results included, as the context assembler put them) and the
 * tool declarations (names, descriptions, JSON schemas), each by the estimate the context
 * assembler uses (context.ts: UTF-8 bytes / 4), plus a fixed overhead per message, per tool
 * and per request. The worker's budget checks (worker/drive-usage.ts) take it as what the
 * next prompt will cost, so that a prompt grown past what is left of the budget (a large
 * tool output) is never sent.
 *
 * An estimate, not a count: no provider's tokenizer is a dependency of agentd. Text that a
 * tokenizer cuts finer than 4 bytes a token is under-counted; the worker scales the
 * estimate by what the provider reported for the drive's last step (never below 1) and
 * never takes less than that step's reported prompt. Must never: read anything but the
 * request, or count a part of the request twice.
 */
import { estimateMessageTokens, estimateTokens } from "./context.ts";
import type { EngineRequest } from "./port.ts";

/** Per tool declaration: the wrapper a provider puts around it (type, function, name). */
const TOOL_OVERHEAD_TOKENS = 16;
/** Per request: the provider's framing of the conversation and the reply's priming. */
const REQUEST_OVERHEAD_TOKENS = 16;

/** Estimated prompt tokens of `request` (its `maxOutputTokens` is not part of the prompt). */
export function estimateRequestTokens(request: EngineRequest): number {
  let n = REQUEST_OVERHEAD_TOKENS + estimateTokens(request.system);
  for (const m of request.messages) n += estimateMessageTokens(m);
  for (const t of request.tools)
    n +=
      TOOL_OVERHEAD_TOKENS +
      estimateTokens(`${t.name}${t.description}`) +
      estimateTokens(JSON.stringify(t.inputSchema));
  return n;
}
