// Client-side routing over the History API: each console path maps to a page.
// The server answers every one of these paths with index.html.

export interface Page {
  /** Render into ``main``; the returned function (if any) runs when the page is left. */
  (main: HTMLElement, params: Record<string, string>): (() => void) | void | Promise<(() => void) | void>;
}

interface Route { pattern: RegExp; names: string[]; page: Page; title: string }

const routes: Route[] = [];
let leave: (() => void) | void = undefined;
let renderCount = 0;

export function route(path: string, title: string, page: Page): void {
  const names: string[] = [];
  const pattern = new RegExp("^" + path.replace(/:(\w+)/g, (_, name: string) => {
    names.push(name);
    return "([^/]+)";
  }) + "/?$");
  routes.push({ pattern, names, page, title });
}

export function navigate(path: string, replaceState = false): void {
  if (replaceState) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  void render();
}

/** Render the page for the current location. */
export async function render(): Promise<void> {
  if (leave) leave();
  leave = undefined;
  const main = document.getElementById("main") as HTMLElement;
  const path = location.pathname;
  const found = routes.find((r) => r.pattern.test(path)) ?? routes[routes.length - 1];
  const match = found.pattern.exec(path);
  const params: Record<string, string> = {};
  found.names.forEach((name, index) => {
    params[name] = decodeURIComponent(match?.[index + 1] ?? "");
  });
  document.title = `${found.title} · Spate`;
  main.replaceChildren();
  const rendered = ++renderCount;
  const cleanup = await found.page(main, params);
  if (rendered === renderCount) leave = cleanup;
  else if (cleanup) cleanup();
  // Move focus to the new page's content, so keyboard and screen-reader users start there.
  // The heading is focusable by script only (tabindex -1), and the style sheet draws no
  // ring for that: the ring is for what the user moved to, not for where a page starts.
  const heading = main.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: true });
  }
}

/** Follow same-origin links without reloading the page. */
export function interceptLinks(): void {
  document.addEventListener("click", (event) => {
    const link = (event.target as Element | null)?.closest("a");
    if (!link || link.target || link.hasAttribute("download") || link.origin !== location.origin
      || event.defaultPrevented) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
    if (link.hash && link.pathname === location.pathname) return;
    event.preventDefault();
    navigate(link.pathname + link.search);
  });
  window.addEventListener("popstate", () => void render());
}
