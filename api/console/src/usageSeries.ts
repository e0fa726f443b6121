// Usage as the charts and tables show it: the API's rows (per period, pipeline and
// dimension, in base units) summed per pipeline, laid out per period, and the month's
// cost to date with a linear forecast. Pure functions of the API's answers.

import type { Usage, UsageItem } from "./api";

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/** How a dimension is shown: its name, its unit, and base quantities per unit. */
export interface DimensionView { key: string; label: string; unit: string; perUnit: number }

/** Every metered dimension, in the order tables show them. */
export const DIMENSIONS: DimensionView[] = [
  { key: "compute_unit_seconds", label: "Compute", unit: "SCU-hours", perUnit: 3600 },
  { key: "events_in", label: "Events in", unit: "events", perUnit: 1 },
  { key: "events_out", label: "Events out", unit: "events", perUnit: 1 },
  { key: "state_gb_seconds", label: "State", unit: "GiB-hours", perUnit: 3600 },
  { key: "cpu_seconds", label: "CPU", unit: "CPU-hours", perUnit: 3600 },
  { key: "memory_gb_seconds", label: "Memory", unit: "GiB-hours", perUnit: 3600 },
  { key: "preview_seconds", label: "Preview time", unit: "minutes", perUnit: 60 },
];

export function dimension(key: string): DimensionView {
  return DIMENSIONS.find((d) => d.key === key) ?? { key, label: key, unit: "", perUnit: 1 };
}

/** What a row is charged to: a pipeline (by id) or the tenant's previews. */
export function pipelineKey(item: UsageItem): string {
  return item.pipeline_id ?? "previews";
}

/** A row's pipeline as people know it; previews are "previews", and a deleted
 * pipeline (its usage outlives it) by the name it had, marked deleted. */
export function pipelineLabel(item: UsageItem): string {
  if (item.pipeline_id === null) return "previews";
  // Only a pipeline deleted before its name was kept for bills has none.
  const name = item.pipeline_name ?? "a pipeline";
  return item.pipeline_deleted ? `${name} (deleted)` : name;
}

/** One pipeline's (or the previews') usage over the whole span: each dimension in its
 * unit, and the cost. */
export interface PipelineUsage {
  key: string; label: string;
  /** The name of a pipeline that still exists, to link to (null: previews, or deleted). */
  name: string | null;
  quantities: Record<string, number>; cost: number;
}

/** Per pipeline, costliest first; previews last. */
export function byPipeline(usage: Usage): PipelineUsage[] {
  const rows = new Map<string, PipelineUsage>();
  for (const item of usage.items) {
    const key = pipelineKey(item);
    const row = rows.get(key) ?? { key, label: pipelineLabel(item),
      name: item.pipeline_deleted ? null : item.pipeline_name, quantities: {}, cost: 0 };
    row.quantities[item.dimension] = (row.quantities[item.dimension] ?? 0)
      + item.quantity / dimension(item.dimension).perUnit;
    row.cost += item.cost;
    rows.set(key, row);
  }
  return [...rows.values()].sort((a, b) => Number(a.key === "previews") - Number(b.key === "previews")
    || b.cost - a.cost || a.label.localeCompare(b.label));
}

/** The start (epoch ms, UTC) of every period in the usage's span, empty ones included. */
export function periods(usage: Usage): number[] {
  const step = usage.granularity === "day" ? DAY_MS : MINUTE_MS;
  const end = Date.parse(usage.end);
  const starts: number[] = [];
  for (let at = Math.floor(Date.parse(usage.start) / step) * step; at < end; at += step) starts.push(at);
  return starts;
}

/** A period's label: the day, or the minute, in UTC (as bills count). */
export function periodLabel(at: number, granularity: Usage["granularity"]): string {
  return granularity === "day"
    ? new Date(at).toLocaleDateString(undefined, { month: "short", day: "numeric", timeZone: "UTC" })
    : new Date(at).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23",
      timeZone: "UTC" });
}

export interface Series { label: string; data: number[] }

/** One dimension per period, one series per pipeline (for a stacked chart). ``per``
 * turns a period's sum into what is drawn; by default the dimension's unit. */
export function seriesByPipeline(usage: Usage, dimensionKey: string,
                                 per: (sum: number, periodStart: number) => number = (sum) =>
                                   sum / dimension(dimensionKey).perUnit): Series[] {
  const starts = periods(usage);
  const index = new Map(starts.map((at, i) => [at, i]));
  const series = new Map<string, Series>();
  for (const item of usage.items) {
    if (item.dimension !== dimensionKey) continue;
    const at = index.get(Date.parse(item.period_start));
    if (at === undefined) continue;
    const key = pipelineKey(item);
    const one = series.get(key) ?? { label: pipelineLabel(item), data: starts.map(() => 0) };
    one.data[at] += item.quantity;
    series.set(key, one);
  }
  return [...series.values()].sort((a, b) => a.label.localeCompare(b.label))
    .map((s) => ({ label: s.label, data: s.data.map((sum, i) => per(sum, starts[i])) }));
}

/** One dimension per period over every pipeline. */
export function seriesTotal(usage: Usage, dimensionKey: string, label: string): Series {
  const byOne = seriesByPipeline(usage, dimensionKey);
  const data = periods(usage).map((_, i) => byOne.reduce((sum, s) => sum + s.data[i], 0));
  return { label, data };
}

/** State held on average over a period, in GiB: its GiB-seconds over the seconds of the
 * period that have passed (the current one is not over yet). */
export function averageGiB(usage: Usage): (sum: number, periodStart: number) => number {
  const step = usage.granularity === "day" ? DAY_MS : MINUTE_MS;
  const end = Date.parse(usage.end);
  return (sum, periodStart) => {
    const seconds = (Math.min(periodStart + step, end) - periodStart) / 1000;
    return seconds > 0 ? sum / seconds : 0;
  };
}

/** The month's cost day by day, and where it is heading. */
export interface CostForecast {
  labels: string[];
  /** Cost so far at the end of each day up to today (null after). */
  toDate: (number | null)[];
  /** The linear forecast from today to the month's end (null before today). */
  forecast: (number | null)[];
  costSoFar: number;
  /** The cost the month ends at if it goes on as so far: cost so far / elapsed fraction. */
  forecastTotal: number;
  elapsedFraction: number;
}

/** Cost to date and a linear forecast from usage by day since the month began. */
export function costForecast(usage: Usage): CostForecast {
  const begins = new Date(usage.start);
  const monthStart = Date.UTC(begins.getUTCFullYear(), begins.getUTCMonth(), 1);
  const monthEnd = Date.UTC(begins.getUTCFullYear(), begins.getUTCMonth() + 1, 1);
  const now = Math.min(Date.parse(usage.end), monthEnd);
  const days: number[] = [];
  for (let at = monthStart; at < monthEnd; at += DAY_MS) days.push(at);
  const daily = days.map(() => 0);
  for (const item of usage.items) {
    const day = Math.floor((Date.parse(item.period_start) - monthStart) / DAY_MS);
    if (day >= 0 && day < days.length) daily[day] += item.cost;
  }
  const today = Math.min(Math.floor((now - monthStart) / DAY_MS), days.length - 1);
  const costSoFar = usage.total_cost;
  const elapsedFraction = Math.max((now - monthStart) / (monthEnd - monthStart), 0);
  const perMs = elapsedFraction > 0 ? costSoFar / (now - monthStart) : 0;
  let running = 0;
  const toDate = days.map((_, i) => {
    running += daily[i];
    return i <= today ? running : null;
  });
  const forecast = days.map((at, i) => i < today ? null
    : i === today ? costSoFar : perMs * (Math.min(at + DAY_MS, monthEnd) - monthStart));
  return { labels: days.map((at) => periodLabel(at, "day")), toDate, forecast, costSoFar,
    forecastTotal: elapsedFraction > 0 ? costSoFar / elapsedFraction : 0, elapsedFraction };
}

/** The month a span starts in, as people say it: "November 2026". */
export function monthName(usage: Usage): string {
  return new Date(usage.start).toLocaleDateString(undefined, { month: "long", year: "numeric", timeZone: "UTC" });
}
