/** Run labels as key=value chips. */
export function Labels(props: { labels: Record<string, string> }) {
  const entries = Object.entries(props.labels).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return null;
  return (
    <ul class="chips" aria-label="Labels">
      {entries.map(([k, v]) => (
        <li key={k} class="chip">
          {v === "" ? k : `${k}=${v}`}
        </li>
      ))}
    </ul>
  );
}
