/**
 * A promise raced against a deadline: the answer `late()` gives when `p` has not settled
 * within `ms` (the timer is cleared either way). For checks that must never hang on a
 * dependency: probes, scrapes, the Docker engine's ping.
 */
export async function withDeadline<T>(
  p: Promise<T>,
  ms: number,
  late: () => T | Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((resolve, reject) => {
        timer = setTimeout(() => Promise.resolve().then(late).then(resolve, reject), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
