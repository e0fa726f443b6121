// The console's entry point: the header (navigation, who is signed in) and the routes.

import "./style.css";

import { type Caller, get, whenUnauthenticated } from "./api";
import { refreshBanner } from "./banner";
import { h, replace } from "./dom";
import { connectionsPage } from "./pages/connections";
import { detailPage } from "./pages/detail";
import { editorPage } from "./pages/editor";
import { invoicesPage } from "./pages/invoices";
import { keysPage } from "./pages/keys";
import { pipelinesPage } from "./pages/pipelines";
import { quotasPage } from "./pages/quotas";
import { signInPage } from "./pages/signin";
import { udfsPage } from "./pages/udfs";
import { usagePage } from "./pages/usage";
import { setCallerRole } from "./roles";
import { interceptLinks, navigate, type Page, render, route } from "./router";
import { forgetKey, storedKey } from "./session";

const NAV: [string, string][] = [
  ["/pipelines", "Pipelines"],
  ["/pipelines/new", "New pipeline"],
  ["/connections", "Connections"],
  ["/udfs", "UDFs"],
  ["/usage", "Usage"],
  ["/invoices", "Invoices"],
  ["/quotas", "Quotas"],
  ["/keys", "API keys"],
];

/** The signed-in key (null: signed out, or not read yet), for what depends on its role. */
let caller: Promise<Caller | null> = Promise.resolve(null);

/** Show the navigation and the tenant for the stored key (or nothing when signed out). */
export async function refreshHeader(): Promise<void> {
  const nav = document.getElementById("nav") as HTMLElement;
  const who = document.getElementById("who") as HTMLElement;
  if (!storedKey()) {
    caller = Promise.resolve(null);
    setCallerRole(Promise.resolve(null));
    replace(nav);
    replace(who);
    void refreshBanner(null);
    return;
  }
  replace(nav, h("ul", {}, NAV.map(([path, label]) => h("li", {}, h("a", { href: path }, label)))));
  markCurrent();
  caller = get<Caller>("/me").catch(() => null);
  setCallerRole(caller.then((me) => me?.role ?? null));
  try {
    const me = await caller;
    if (!me) throw new Error("not signed in");
    replace(who,
      h("span", {}, "Tenant ", h("strong", { "data-testid": "tenant" }, me.tenant),
        ` · ${me.key_name} (${me.role})`),
      h("button", { type: "button", class: "secondary", onclick: signOut }, "Sign out"));
  } catch {
    replace(who);
  }
}

function markCurrent(): void {
  for (const link of document.querySelectorAll<HTMLAnchorElement>("#nav a")) {
    if (link.pathname === location.pathname) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function signOut(): void {
  forgetKey();
  void refreshHeader();
  navigate("/sign-in");
}

/** Pages that need a key send a signed-out visitor to sign in first; on each, the budget
 * banner is read again. */
function signedIn(page: Page): Page {
  return (main, params) => {
    if (!storedKey()) {
      navigate(`/sign-in?next=${encodeURIComponent(location.pathname)}`, true);
      return;
    }
    markCurrent();
    void caller.then((me) => refreshBanner(me?.role ?? null));
    return page(main, params);
  };
}

route("/sign-in", "Sign in", (main) => signInPage(main, refreshHeader));
route("/pipelines/new", "New pipeline", signedIn(editorPage));
route("/pipelines/:name", "Pipeline", signedIn(detailPage));
route("/pipelines", "Pipelines", signedIn(pipelinesPage));
route("/connections", "Connections", signedIn(connectionsPage));
route("/udfs", "UDFs", signedIn(udfsPage));
route("/usage", "Usage", signedIn(usagePage));
route("/invoices", "Invoices", signedIn(invoicesPage));
route("/quotas", "Quotas", signedIn(quotasPage));
route("/keys", "API keys", signedIn(keysPage));
route("/", "Pipelines", () => navigate("/pipelines", true));
// Last: anything else.
route(".*", "Not found", (main) => {
  replace(main, h("h1", {}, "Page not found"), h("p", {}, h("a", { href: "/pipelines" }, "Go to the pipelines")));
});

whenUnauthenticated(() => {
  void refreshHeader();
  navigate(`/sign-in?next=${encodeURIComponent(location.pathname)}`, true);
});
interceptLinks();
void refreshHeader();
void render();
