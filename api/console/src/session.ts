// The signed-in API key lives in sessionStorage: it lasts for this browser tab's
// session and is sent only as a bearer token to this origin's API.

const KEY = "spate.apiKey";

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function storeKey(apiKey: string): void {
  sessionStorage.setItem(KEY, apiKey);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}
