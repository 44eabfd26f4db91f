/**
 * The bearer token of this browser tab: kept in sessionStorage only (gone when the tab
 * closes), never in a URL, a cookie or localStorage.
 */
const KEY = "agentd.token";

export function loadToken(): string {
  try {
    return sessionStorage.getItem(KEY) ?? "";
  } catch {
    return "";
  }
}

export function saveToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
}
