/**
 * Byte sizes as operators write them: a whole number of bytes, or a number and a unit
 * (`512KiB`, `10MiB`, `2GiB`, `1TiB`; `KB`/`MB`/`GB`/`TB` are powers of 1000). Must never:
 * accept a negative, fractional-byte or unsafe-integer result.
 */
const UNIT: Readonly<Record<string, number>> = {
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
  TB: 1e12,
  KiB: 2 ** 10,
  MiB: 2 ** 20,
  GiB: 2 ** 30,
  TiB: 2 ** 40,
};

/** Bytes of `value` (a number or a string), or an error message (never throws). */
export function parseByteSize(value: number | string): number | string {
  const text = String(value).trim();
  const m = /^([0-9]{1,16}(?:\.[0-9]{1,6})?)\s?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$/.exec(text);
  if (m === null) return "must be a number of bytes or a size such as 512MiB or 10GiB";
  const bytes = Number(m[1]) * (UNIT[m[2] ?? "B"] as number);
  if (!Number.isSafeInteger(bytes)) return "must be a whole number of bytes below 2^53";
  if (bytes <= 0) return "must be more than 0";
  return bytes;
}
