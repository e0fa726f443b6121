// API keys: create one (its secret shown this once, with a copy button), revoke.

import { type ApiKey, type ApiKeyCreated, del, get, type Page, post, describe } from "../api";
import { field, h, replace } from "../dom";
import { formatTime } from "../format";
import { allows, callerRole, refusal } from "../roles";

export async function keysPage(main: HTMLElement): Promise<void> {
  const signedIn = await callerRole();
  if (!allows(signedIn, "keys")) {
    // The API refuses every key but an admin's here: say so instead of asking.
    replace(main, h("h1", {}, "API keys"), h("div", { class: "failure", role: "alert", "data-testid": "refused" },
      h("strong", {}, "API keys are not available to this key. "), refusal(signedIn, "keys")));
    return;
  }
  const body = h("tbody");
  const notice = h("p", { role: "status", class: "muted" });
  const created = h("div", { "aria-live": "polite" });
  const name = h("input", { type: "text", name: "name", required: true, maxlength: 100, autocomplete: "off" });
  const role = h("select", { name: "role" },
    h("option", { value: "viewer" }, "viewer: read only"),
    h("option", { value: "developer" }, "developer: pipelines and connections"),
    h("option", { value: "billing" }, "billing: read only, plus usage, invoices and budget"),
    h("option", { value: "admin" }, "admin: everything, keys too"));
  const formError = h("p", { role: "alert", class: "error", hidden: true });
  const form = h("form", { class: "card", "aria-labelledby": "create-key-title" },
    h("h2", { id: "create-key-title" }, "Create a key"),
    h("div", { class: "row" }, field("Key name", name, "What the key is for, e.g. 'ci'."), field("Role", role)),
    h("button", { type: "submit" }, "Create key"),
    formError);
  replace(main, h("h1", {}, "API keys"), form, created, notice,
    h("table", { class: "data", "aria-label": "API keys" },
      h("thead", {}, h("tr", {}, ["Name", "Role", "Prefix", "Created", ""]
        .map((label) => h("th", { scope: "col" }, label)))), body));

  const load = async () => {
    const keys = await get<Page<ApiKey>>("/api-keys?limit=200");
    replace(body, keys.items.map((key) => h("tr", { "data-key": key.name },
      h("th", { scope: "row" }, key.name), h("td", {}, key.role), h("td", {}, h("code", {}, key.prefix)),
      h("td", {}, formatTime(key.created_at)),
      h("td", {}, revokeButton(key, notice, load)))));
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    formError.hidden = true;
    try {
      const key = await post<ApiKeyCreated>("/api-keys", { name: name.value.trim(), role: role.value });
      replace(created, secretPanel(key));
      name.value = "";
      await load();
    } catch (error) {
      formError.textContent = `Could not create the key: ${describe(error)}`;
      formError.hidden = false;
    }
  });
  await load();
}

/** The new key's secret: shown here once; the API never returns it again. */
function secretPanel(key: ApiKeyCreated): HTMLElement {
  const secret = h("input", { type: "text", readonly: true, value: key.key, class: "secret", spellcheck: "false" });
  const copied = h("span", { role: "status", class: "muted" });
  const copy = h("button", { type: "button", class: "secondary" }, "Copy key");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(key.key);
      copied.textContent = "Copied.";
    } catch {
      // No clipboard permission: select the text so the user can copy it by hand.
      secret.select();
      copied.textContent = "Selected: press Ctrl+C to copy.";
    }
  });
  return h("section", { class: "card highlight", "aria-labelledby": "new-key-title" },
    h("h2", { id: "new-key-title" }, `Key “${key.name}” created`),
    h("p", {}, "Copy it now: it is shown only this once."),
    field("New API key", secret), copy, " ", copied);
}

function revokeButton(key: ApiKey, notice: HTMLElement, reload: () => Promise<void>): HTMLElement {
  const button = h("button", { type: "button", class: "danger", "aria-label": `Revoke ${key.name}` }, "Revoke");
  let armed = false;
  button.addEventListener("click", async () => {
    if (!armed) {
      // A second click confirms: revoking cannot be undone.
      armed = true;
      button.textContent = "Confirm revoke";
      button.setAttribute("aria-label", `Confirm revoking ${key.name}`);
      return;
    }
    try {
      await del(`/api-keys/${key.id}`);
      notice.textContent = `Key “${key.name}” revoked.`;
      await reload();
    } catch (error) {
      notice.textContent = `Could not revoke: ${describe(error)}`;
    }
  });
  return button;
}
