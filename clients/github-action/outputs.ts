/**
 * The step's outputs, appended to the file GitHub names in $GITHUB_OUTPUT, in the
 * multi-line form `name<<DELIMITER` … `DELIMITER` with a delimiter nobody can guess.
 *
 * Must never: write a value in which a line could end the value early and start another
 * output (a value holding the delimiter is refused; the delimiter is 128 random bits), or
 * write an output name GitHub would misread.
 */
import { randomBytes } from "node:crypto";
import { appendFileSync } from "node:fs";

const NAME = /^[a-z][a-z0-9-]*$/;

/** The text to append for `values` (names `[a-z][a-z0-9-]*`); `delimiter` for tests. */
export function formatOutputs(
  values: Record<string, string>,
  delimiter = `ghadelimiter_${randomBytes(16).toString("hex")}`,
): string {
  let out = "";
  for (const [name, value] of Object.entries(values)) {
    if (!NAME.test(name))
      throw new Error(`output name ${JSON.stringify(name)} is not [a-z][a-z0-9-]*`);
    if (value.includes(delimiter))
      throw new Error(`output ${name}: the value holds the delimiter; refusing to write it`);
    out += `${name}<<${delimiter}\n${value}\n${delimiter}\n`;
  }
  return out;
}

/** Appends `values` to `file` (the path in $GITHUB_OUTPUT). */
export function writeOutputs(file: string, values: Record<string, string>): void {
  appendFileSync(file, formatOutputs(values));
}
