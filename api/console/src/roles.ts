// What the signed-in key's role lets it do, as the API decides it (api/security.py): a
// page disables what the API would refuse, and says why on the control itself.

/** What a page may ask for: write (pipelines, previews, connections, UDFs), billing
 * (usage, costs, invoices, the budget), or API keys. Reading the rest is every role's. */
export type Ability = "write" | "billing" | "keys";

const ALLOWED: Record<Ability, string[]> = {
  write: ["developer", "admin"],
  billing: ["billing", "admin"],
  keys: ["admin"],
};

/** The keys that may, as a sentence says it. */
const NEEDS: Record<Ability, string> = {
  write: "a developer or admin key",
  billing: "an admin or billing key",
  keys: "an admin key",
};

let role: Promise<string | null> = Promise.resolve(null);

/** The header hands over who is signed in as it asks /me. */
export function setCallerRole(next: Promise<string | null>): void {
  role = next;
}

/** The signed-in key's role; null when it is not known (the API then decides alone). */
export function callerRole(): Promise<string | null> {
  return role;
}

export function allows(current: string | null, ability: Ability): boolean {
  return current === null || ALLOWED[ability].includes(current);
}

/** Why ``current`` may not: what it takes, and what the key is. */
export function refusal(current: string | null, ability: Ability): string {
  return `This needs ${NEEDS[ability]}; you are signed in with a ${current} key.`;
}

type Control = HTMLButtonElement | HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

/** Disable each of ``controls`` that ``current`` cannot use, with the reason as its
 * tooltip (and description, for screen readers); true when it may use them. */
export function gate(current: string | null, ability: Ability, ...controls: Control[]): boolean {
  const allowed = allows(current, ability);
  for (const control of controls) {
    if (allowed) continue;
    control.disabled = true;
    control.title = refusal(current, ability);
    control.setAttribute("aria-description", control.title);
  }
  return allowed;
}

/** A line for the top of a page saying what the key ``can`` do here and that what it
 * ``cannot`` takes another role (null when it may do both). */
export function roleNote(current: string | null, ability: Ability, can: string, cannot: string): HTMLElement | null {
  if (allows(current, ability)) return null;
  const note = document.createElement("p");
  note.className = "muted role-note";
  note.setAttribute("data-testid", "role-note");
  note.textContent = `You are signed in with a ${current} key: it can ${can}; ${cannot} needs ${NEEDS[ability]}.`;
  return note;
}
