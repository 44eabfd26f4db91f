/** Assigns without ever invoking the `__proto__` setter (JSON.parse makes own "__proto__" keys). */
export function safePut(target: Record<string, unknown>, k: string, v: unknown): void {
  if (k === "__proto__") {
    Object.defineProperty(target, k, {
      value: v,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  } else {
    target[k] = v;
  }
}
