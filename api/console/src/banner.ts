// The budget banner at the top of every page, while this month has budget alerts: a
// threshold crossed, or the hard stop reached (pipelines stopped, starts refused).
// Budgets are the tenant admin's, so only an admin key asks for one.

import { ApiError, type Budget, get } from "./api";
import { h, replace } from "./dom";
import { formatMoney, formatTime, percentOf } from "./format";

/** Ask for the budget and show its banner (or none); ``role`` is the signed-in key's. */
export async function refreshBanner(role: string | null): Promise<void> {
  const box = document.getElementById("banner");
  if (!box) return;
  if (role !== "admin") {
    replace(box);
    return;
  }
  try {
    replace(box, bannerOf(await get<Budget>("/budget")));
  } catch (error) {
    // 404: no budget is set, so there is nothing to warn about.
    if (!(error instanceof ApiError && error.status === 404)) console.warn("budget not read", error);
    replace(box);
  }
}

/** The banner for ``budget``: null while this month has no alert. */
export function bannerOf(budget: Budget): HTMLElement | null {
  const alerts = budget.alerts.filter((alert) => alert.period === budget.period);
  if (alerts.length === 0) return null;
  const spent = formatMoney(budget.spent, budget.currency);
  const amount = formatMoney(budget.amount, budget.currency);
  const link = h("a", { href: "/usage" }, "Usage and budget");
  const stopped = alerts.find((alert) => alert.kind === "hard_stop");
  // The hard stop holds while the budget still has it and the month's cost is over it:
  // a higher budget (or the hard stop turned off) lets pipelines start again.
  if (stopped && budget.hard_stop && budget.spent >= budget.amount) {
    return h("div", { class: "banner stop", role: "alert", "data-testid": "budget-banner" },
      h("strong", {}, "Budget reached: "),
      `this month's cost so far, ${spent}, has reached the budget of ${amount}. `,
      `Running pipelines were stopped (after a checkpoint) on ${formatTime(stopped.at)}, and starting `,
      "a pipeline or a preview is refused until next month or a higher budget. ", link);
  }
  const crossed = Math.max(...alerts.map((alert) => alert.threshold));
  const share = percentOf(budget.spent, budget.amount);
  return h("div", { class: "banner warn", role: "status", "data-testid": "budget-banner" },
    h("strong", {}, "Budget alert: "),
    `this month's cost so far, ${spent}, is ${share} % of the budget of ${amount} (alert at ${crossed} %). `,
    stopped ? "Pipelines were stopped when the budget was reached; they can be started again. " : "",
    link);
}
