/**
 * The model reviewer's models for a worker (policy `reviewer.model`, `approval: reviewer`):
 * the same OpenAI-compatible endpoint and key as the agent's model (OPENAI_API_KEY,
 * --model-base-url / OPENAI_BASE_URL), one client per model id. Without a key there is no
 * reviewer: every call under `approval: reviewer` asks a person (reviewer.verdict says
 * so). Must never send anything to a model the policy did not name.
 */
import type { LanguageModel } from "ai";
import { createOpenAiModel } from "../../internal/engine/ai-sdk-engine.ts";

export function reviewerModels(o: {
  apiKey: string;
  baseURL: string | undefined;
}): ((modelId: string) => LanguageModel | undefined) | undefined {
  if (o.apiKey === "") return undefined;
  const made = new Map<string, LanguageModel>();
  return (modelId) => {
    let m = made.get(modelId);
    if (m === undefined) {
      m = createOpenAiModel({
        apiKey: o.apiKey,
        model: modelId,
        ...(o.baseURL === undefined ? {} : { baseURL: o.baseURL }),
      });
      made.set(modelId, m);
    }
    return m;
  };
}
