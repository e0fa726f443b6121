// Invoices: every month from the tenant's first usage, open or closed, with its total;
// each can be viewed (its lines, and the API's JSON) or downloaded as CSV. The CSV is
// fetched with the key (a plain link cannot send it) and handed over as a file.

import { describe, get, getFile, type Invoice, type InvoiceSummary } from "../api";
import { h, replace } from "../dom";
import { formatMoney, formatQuantity, formatTime } from "../format";
import { dimension } from "../usageSeries";
import { refusal } from "./usage";

export async function invoicesPage(main: HTMLElement): Promise<void> {
  const heading = h("h1", {}, "Invoices");
  let invoices: InvoiceSummary[];
  try {
    invoices = await get<InvoiceSummary[]>("/invoices");
  } catch (error) {
    replace(main, heading, refusal(error, "Invoices"));
    return;
  }
  const notice = h("p", { role: "status", class: "muted" });
  const shown = h("div", { "aria-live": "polite" });
  const rows = invoices.map((invoice) => h("tr", { "data-period": invoice.period },
    h("th", { scope: "row" }, invoice.period),
    h("td", {}, h("span", { class: `state state-${invoice.state}` }, invoice.state)),
    h("td", { class: "num", "data-testid": "total" }, formatMoney(invoice.total, invoice.currency)),
    h("td", {}, invoice.state === "closed" ? formatTime(invoice.closed_at) : "grows as usage arrives"),
    h("td", {}, h("div", { class: "row-buttons" },
      h("button", { type: "button", class: "secondary", "aria-label": `View ${invoice.period}`,
        onclick: () => void view(invoice.period, shown, notice) }, "View JSON"),
      h("button", { type: "button", class: "secondary", "aria-label": `Download ${invoice.period} as CSV`,
        onclick: () => void download(invoice.period, notice) }, "Download CSV")))));
  replace(main, heading,
    h("p", { class: "muted" }, "A month (UTC) is open while it runs and closes an hour after it ends; ",
      "a closed invoice never changes."),
    invoices.length === 0 ? h("p", { class: "muted" }, "No invoices yet.")
      : h("table", { class: "data", "aria-label": "Invoices" },
        h("thead", {}, h("tr", {}, ["Period", "State", "Total", "Closed", "Invoice"]
          .map((label) => h("th", { scope: "col" }, label)))),
        h("tbody", {}, rows)),
    notice, shown);
}

/** The invoice's lines, and its JSON as the API returns it. */
async function view(period: string, box: HTMLElement, notice: HTMLElement): Promise<void> {
  try {
    const invoice = await get<Invoice>(`/invoices/${encodeURIComponent(period)}`);
    notice.textContent = "";
    replace(box, invoiceCard(invoice));
    box.querySelector<HTMLElement>("h2")?.focus();
  } catch (error) {
    notice.textContent = `Could not read ${period}: ${describe(error)}`;
  }
}

function invoiceCard(invoice: Invoice): HTMLElement {
  const money = (amount: number) => formatMoney(amount, invoice.currency);
  const lines = invoice.lines.map((line) => h("tr", {},
    h("th", { scope: "row" }, line.pipeline_id === null ? h("em", {}, "previews")
      : line.pipeline_name ?? "a deleted pipeline"),
    h("td", {}, dimension(line.dimension).label),
    h("td", { class: "num" }, `${formatQuantity(line.quantity)} ${line.unit}`),
    h("td", { class: "num" }, money(line.unit_price)),
    h("td", { class: "num" }, money(line.amount))));
  return h("section", { class: "card", "aria-labelledby": "invoice-title", "data-testid": "invoice" },
    h("h2", { id: "invoice-title", tabindex: -1 }, `Invoice ${invoice.period} (${invoice.state})`),
    h("table", { class: "data", "aria-label": `Lines of ${invoice.period}` },
      h("thead", {}, h("tr", {}, ["Pipeline", "Dimension", "Quantity", "Unit price", "Amount"]
        .map((label) => h("th", { scope: "col" }, label)))),
      h("tbody", {}, lines),
      h("tfoot", {}, h("tr", {}, h("th", { scope: "row", colspan: 4 }, "Total"),
        h("td", { class: "num" }, money(invoice.total))))),
    h("details", {}, h("summary", {}, "JSON"),
      h("pre", { class: "json" }, JSON.stringify(invoice, null, 2))));
}

/** Fetch the CSV with the key, then hand it to the browser as a file. */
async function download(period: string, notice: HTMLElement): Promise<void> {
  try {
    const file = await getFile(`/invoices/${encodeURIComponent(period)}?format=csv`,
      `spate-invoice-${period}.csv`);
    const url = URL.createObjectURL(file.blob);
    const link = h("a", { href: url, download: file.name, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    // The browser has taken the file once the click is handled; the URL can go later.
    window.setTimeout(() => URL.revokeObjectURL(url), 60_000);
    notice.textContent = `Downloaded ${file.name}.`;
  } catch (error) {
    notice.textContent = `Could not download ${period}: ${describe(error)}`;
  }
}
