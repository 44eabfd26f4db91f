/**
 * Token cost from a price table, in integer micro-dollars (1 USD = 1,000,000 micros).
 * Prices are micro-dollars per million tokens, per model; config shape:
 * `{ [model]: { inputPerMTok: number; outputPerMTok: number } }`.
 *
 * Must never: use floating-point for money (BigInt, one rounding, half up), or guess a
 * price: a model not in the table costs 0 and is reported `known: false`.
 */
import { AgentdError, invalid } from "../errors.ts";

export interface ModelPrice {
  /** Micro-dollars per 1,000,000 input tokens ($2.50 → 2_500_000). */
  inputPerMTok: number;
  /** Micro-dollars per 1,000,000 output tokens. */
  outputPerMTok: number;
}

export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * OpenAI list prices (standard tier, uncached input) when this table was written. They
 * change: operators override or extend them in config.
 */
export const DEFAULT_PRICE_TABLE: PriceTable = Object.freeze({
  "gpt-4o": { inputPerMTok: 2_500_000, outputPerMTok: 10_000_000 },
  "gpt-4o-mini": { inputPerMTok: 150_000, outputPerMTok: 600_000 },
  "gpt-4.1": { inputPerMTok: 2_000_000, outputPerMTok: 8_000_000 },
  "gpt-4.1-mini": { inputPerMTok: 400_000, outputPerMTok: 1_600_000 },
  "gpt-4.1-nano": { inputPerMTok: 100_000, outputPerMTok: 400_000 },
  o3: { inputPerMTok: 2_000_000, outputPerMTok: 8_000_000 },
  "o4-mini": { inputPerMTok: 1_100_000, outputPerMTok: 4_400_000 },
  "gpt-5": { inputPerMTok: 1_250_000, outputPerMTok: 10_000_000 },
  "gpt-5-mini": { inputPerMTok: 250_000, outputPerMTok: 2_000_000 },
  "gpt-5-nano": { inputPerMTok: 50_000, outputPerMTok: 400_000 },
  // The replay engine (make demo, agentd dev without a model) calls no provider: it is
  // priced, at nothing, so a cost budget on such a run is a budget that binds, not refused.
  replay: { inputPerMTok: 0, outputPerMTok: 0 },
});

export interface Cost {
  micros: number;
  /** False when the model is not in the table (the cost is then 0, not a guess). */
  known: boolean;
}

/**
 * The table's price for a model: an exact match, else the name without a date snapshot
 * suffix ("gpt-4o-2024-08-06" → "gpt-4o"). Nothing looser: no prefix guessing.
 */
export function priceFor(model: string, table: PriceTable = DEFAULT_PRICE_TABLE) {
  const hit = own(table, model) ?? own(table, model.replace(/-\d{4}-\d{2}-\d{2}$/, ""));
  return hit === undefined
    ? { inputPerMTok: 0, outputPerMTok: 0, known: false }
    : { ...hit, known: true };
}

export function costMicros(
  model: string,
  usage: { inputTokens: number; outputTokens: number },
  table: PriceTable = DEFAULT_PRICE_TABLE,
): Cost {
  const inTok = count(usage.inputTokens, "usage.inputTokens");
  const outTok = count(usage.outputTokens, "usage.outputTokens");
  const p = priceFor(model, table);
  const scaled = inTok * BigInt(p.inputPerMTok) + outTok * BigInt(p.outputPerMTok);
  const micros = (scaled + 500_000n) / 1_000_000n; // one rounding, half up
  return { micros: Number(micros), known: p.known };
}

/** Validates a price table from config; errors name the field (e.g. "pricing.gpt-4o.inputPerMTok"). */
export function parsePriceTable(value: unknown, field = "pricing"): PriceTable {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid(field, "must be a map of model name to { inputPerMTok, outputPerMTok }");
  }
  const out: Record<string, ModelPrice> = {};
  for (const [model, price] of Object.entries(value)) {
    const f = `${field}.${model}`;
    if (typeof price !== "object" || price === null || Array.isArray(price)) {
      throw invalid(f, "must be { inputPerMTok, outputPerMTok }");
    }
    const extra = Object.keys(price).filter((k) => k !== "inputPerMTok" && k !== "outputPerMTok");
    if (extra.length > 0) throw invalid(`${f}.${extra[0]}`, "unknown field");
    const p = price as Record<string, unknown>;
    out[model] = {
      inputPerMTok: micros(p.inputPerMTok, `${f}.inputPerMTok`),
      outputPerMTok: micros(p.outputPerMTok, `${f}.outputPerMTok`),
    };
  }
  return Object.freeze(out);
}

function own(table: PriceTable, key: string): ModelPrice | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

function count(n: number, field: string): bigint {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new AgentdError("EVALIDATION", `${field}: must be a non-negative integer, got ${n}`, {
      field,
    });
  }
  return BigInt(n);
}

function micros(v: unknown, field: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw invalid(field, "must be a non-negative integer (micro-dollars per million tokens)");
  }
  return v;
}
