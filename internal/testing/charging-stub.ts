/**
 * An OpenAI stub that charges each request as a real provider would: the prompt it got, at
 * about 4 characters of the request body a token, written into the reply's usage chunk and
 * kept in `charged` (one entry per request, in order). For budget tests, whose figures mean
 * nothing unless the prompt's charge grows with the prompt. Test-only.
 */
import { type OpenAiStub, type StubReply, startOpenAiStub } from "./openai-stub.ts";

type UsageChunk = {
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
};

/** `next()` gives the reply to each request (undefined: a 500, the script ran out). */
export function startChargingStub(
  next: () => StubReply | undefined,
  charged: number[],
): Promise<OpenAiStub> {
  return startOpenAiStub((req) => {
    const r = next() ?? { status: 500, body: {} };
    const prompt = Math.ceil(JSON.stringify(req.body).length / 4);
    charged.push(prompt);
    const u = "chunks" in r ? (r.chunks.at(-1) as UsageChunk) : undefined;
    if (u?.usage !== undefined) {
      u.usage.prompt_tokens = prompt;
      u.usage.total_tokens = prompt + u.usage.completion_tokens;
    }
    return r;
  });
}
