// Sign in with an API key: checked against /me, then kept for this browser session.

import { ApiError, type Caller, request } from "../api";
import { field, h, replace } from "../dom";
import { navigate } from "../router";
import { storeKey } from "../session";

export function signInPage(main: HTMLElement, onSignedIn: () => Promise<void>): void {
  const input = h("input", { type: "password", name: "api_key", autocomplete: "off", required: true,
    spellcheck: "false", placeholder: "spate_…" });
  const message = h("p", { role: "alert", class: "error", hidden: true });
  const form = h("form", { class: "card narrow", "aria-labelledby": "sign-in-title" },
    field("API key", input, "Your key is kept only for this browser tab's session."),
    message,
    h("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.hidden = true;
    const apiKey = input.value.trim();
    try {
      await request<Caller>("GET", "/me", undefined, apiKey);
    } catch (error) {
      message.textContent = error instanceof ApiError && error.status === 401
        ? "That key is not valid (or was revoked). Check it and try again."
        : `Could not sign in: ${(error as Error).message}`;
      message.hidden = false;
      input.focus();
      return;
    }
    storeKey(apiKey);
    await onSignedIn();
    const next = new URLSearchParams(location.search).get("next");
    navigate(next && next.startsWith("/") && !next.startsWith("//") ? next : "/pipelines", true);
  });
  replace(main, h("h1", { id: "sign-in-title" }, "Sign in to Spate"), form);
  input.focus();
}
