/**
 * Scripted reviewer models for tests (the AI SDK's MockLanguageModelV4): one answers a
 * fixed text, one fails, one never answers (ignoring the abort signal, as a hung
 * connection would). Each records the prompts it got. Never used outside tests.
 */
import { MockLanguageModelV4 } from "ai/test";

export type ReviewerScript = string | { fail: string } | "never";

export interface ScriptedReviewer {
  model: MockLanguageModelV4;
  /** The system and user text of every request, in order. */
  prompts: { system: string; user: string }[];
}

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

export function scriptedReviewer(
  script: ReviewerScript | ((user: string) => ReviewerScript),
): ScriptedReviewer {
  const prompts: ScriptedReviewer["prompts"] = [];
  const model = new MockLanguageModelV4({
    modelId: "scripted-reviewer",
    doGenerate: async (options) => {
      const system = options.prompt
        .filter((m) => m.role === "system")
        .map((m) => m.content)
        .join("\n");
      const user = options.prompt
        .filter((m) => m.role === "user")
        .flatMap((m) => m.content)
        .map((p) => (p.type === "text" ? p.text : ""))
        .join("");
      prompts.push({ system, user });
      const s = typeof script === "function" ? script(user) : script;
      if (s === "never") return new Promise(() => {});
      if (typeof s !== "string") throw new Error(s.fail);
      return {
        content: [{ type: "text", text: s }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });
  return { model, prompts };
}

/** A verdict as the reviewer model would write it. */
export function verdictText(verdict: string, confidence: number, reasoning = "scripted"): string {
  return JSON.stringify({ verdict, reasoning, confidence });
}
