/**
 * A unified diff, each line coloured by its class: added, removed, hunk header, file; hidden
 * characters (a file name with ESC or a bidi override) shown as escapes.
 */
import { visibleText } from "./shown-text.ts";

function lineClass(line: string): string {
  if (line.startsWith("+++") || line.startsWith("---")) return "d-file";
  if (line.startsWith("@@")) return "d-hunk";
  if (line.startsWith("+")) return "d-add";
  if (line.startsWith("-")) return "d-del";
  return "d-ctx";
}

export function Diff(props: { diff: string }) {
  const lines = props.diff.replace(/\n$/, "").split("\n");
  return (
    <figure class="diff-fig">
      <figcaption class="hint">Proposed change (unified diff)</figcaption>
      <pre class="diff" data-testid="approval-diff">
        {lines.map((l, i) => (
          // A diff line has no identity but its place; the diff never reorders.
          <span key={`${i}:${l}`} class={lineClass(l)}>
            {visibleText(l)}
            {"\n"}
          </span>
        ))}
      </pre>
    </figure>
  );
}
