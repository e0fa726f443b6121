// The monthly budget on the Usage page: what it is, this month's alerts, and a form to
// set, change or remove it (alerts at percentages of it, and optionally a hard stop).

import { ApiError, type Budget, del, describe, get, put } from "../api";
import { field, h, replace } from "../dom";
import { formatMoney, formatTime } from "../format";

/** The budget, or null when none is set (the API's 404). */
export async function readBudget(): Promise<Budget | null> {
  try {
    return await get<Budget>("/budget");
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

/** ``50, 80, 100`` as percentages; null when something else is written. */
export function parseThresholds(text: string): number[] | null {
  const parts = text.split(/[\s,;%]+/).filter(Boolean);
  const numbers = parts.map(Number);
  return numbers.length > 0 && numbers.every((n) => Number.isInteger(n)) ? numbers : null;
}

/** The budget panel; ``onChange`` hears of a budget set, changed or removed. */
export function budgetPanel(initial: Budget | null, currency: string,
                            onChange: (budget: Budget | null) => void): HTMLElement {
  const box = h("div", { class: "card", "data-testid": "budget-panel" });
  const render = (budget: Budget | null, message = "") => {
    const status = h("p", { role: "status", class: "muted" }, message);
    const changed = (next: Budget | null, said: string) => {
      render(next, said);
      onChange(next);
    };
    replace(box, describeBudget(budget), budgetForm(budget, currency, status, changed), status);
  };
  render(initial);
  return box;
}

function describeBudget(budget: Budget | null): HTMLElement[] {
  if (!budget) {
    return [h("p", { "data-testid": "budget-summary" }, "No budget is set. A budget raises an alert at each ",
      "threshold the month's cost crosses, shown at the top of every page; with a hard stop it also ",
      "stops the pipelines when the cost reaches it.")];
  }
  const money = (amount: number) => formatMoney(amount, budget.currency);
  const alerts = budget.alerts.filter((alert) => alert.period === budget.period);
  return [
    h("p", { "data-testid": "budget-summary" },
      h("strong", {}, `${money(budget.amount)} a month`),
      ` · alerts at ${budget.thresholds.join(", ")} % · hard stop ${budget.hard_stop ? "on" : "off"}`,
      ` · ${money(budget.spent)} spent in ${budget.period}`),
    alerts.length === 0 ? h("p", { class: "muted" }, "No alerts this month.")
      : h("ul", { "aria-label": "Budget alerts this month" }, alerts.map((alert) => h("li", {},
        alert.kind === "hard_stop" ? "Hard stop: pipelines stopped" : `${alert.threshold} % crossed`,
        ` at ${formatTime(alert.at)} (cost ${money(alert.cost)})`))),
  ];
}

function budgetForm(budget: Budget | null, currency: string, status: HTMLElement,
                    changed: (budget: Budget | null, said: string) => void): HTMLElement {
  const amount = h("input", { type: "number", name: "amount", min: 0.01, step: 0.01, required: true,
    value: budget ? String(budget.amount) : "" });
  const thresholds = h("input", { type: "text", name: "thresholds", required: true,
    value: (budget?.thresholds ?? [50, 80, 100]).join(", ") });
  const hardStop = h("input", { type: "checkbox", id: "budget-hard-stop", name: "hard_stop",
    checked: budget?.hard_stop ?? false });
  const fail = (text: string) => {
    status.className = "error";
    status.textContent = text;
  };
  const form = h("form", { "aria-label": "Budget" },
    h("div", { class: "row" },
      field(`Monthly budget (${currency})`, amount),
      field("Alert thresholds (%)", thresholds, "Percentages of the budget, e.g. 50, 80, 100.")),
    h("div", { class: "check" }, hardStop, h("label", { for: "budget-hard-stop" },
      "Hard stop: at the budget, stop the pipelines (after a checkpoint) and refuse starts")),
    h("div", { class: "actions" }, h("button", { type: "submit" }, budget ? "Change budget" : "Set budget"),
      budget ? h("button", { type: "button", class: "danger", onclick: async () => {
        try {
          await del("/budget");
          changed(null, "Budget removed.");
        } catch (error) {
          fail(`Could not remove the budget: ${describe(error)}`);
        }
      } }, "Remove budget") : null));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const percentages = parseThresholds(thresholds.value);
    if (!percentages) {
      fail("Thresholds are whole percentages, separated by commas: 50, 80, 100.");
      return;
    }
    try {
      const saved = await put<Budget>("/budget", { amount: Number(amount.value), thresholds: percentages,
        hard_stop: hardStop.checked });
      changed(saved, budget ? "Budget changed." : "Budget set.");
    } catch (error) {
      fail(`Could not save the budget: ${describe(error)}`);
    }
  });
  return form;
}
