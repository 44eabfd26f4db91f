/** Calls `fn` once, `ms` after the last of a burst of calls. */
export function debounce(fn: () => void, ms: number): { (): void; cancel(): void } {
  let t: ReturnType<typeof setTimeout> | undefined;
  const call = () => {
    if (t !== undefined) clearTimeout(t);
    t = setTimeout(() => {
      t = undefined;
      fn();
    }, ms);
  };
  call.cancel = () => {
    if (t !== undefined) clearTimeout(t);
  };
  return call;
}
