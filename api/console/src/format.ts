// How the console writes numbers, sizes, money, times and durations, and the values
// of preview rows, for people to read.

/** Rows per second: whole numbers from 100 up, one decimal from 1, and two significant
 * digits below 1, so a trickle of 0.2 rows/s is not shown as 0.0. */
export function formatRate(perSecond: number | null | undefined): string {
  if (perSecond === null || perSecond === undefined || !Number.isFinite(perSecond)) return "—";
  if (perSecond === 0) return "0";
  if (perSecond >= 100) return perSecond.toFixed(0);
  if (perSecond >= 1) return perSecond.toFixed(1);
  if (perSecond < 0.001) return "< 0.001";
  return String(Number(perSecond.toPrecision(2)));
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** A quantity (SCU-hours, GiB-hours): two decimals from 1 up, two significant digits
 * below, so a small pipeline's 0.0042 SCU-hours is not shown as 0.00. */
export function formatQuantity(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  if (value === 0) return "0";
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString();
  if (Math.abs(value) >= 1) return value.toFixed(2);
  return plainNumber(value);
}

/** A number as a tick or a tooltip shows it: at most two decimals from 1 up, two
 * significant digits below, and never in exponent notation (6.0E-10 reads as nothing). */
export function plainNumber(value: number): string {
  if (!Number.isFinite(value)) return "—";
  if (value === 0) return "0";
  if (Math.abs(value) >= 1) return value.toLocaleString(undefined, { maximumFractionDigits: 2 });
  return value.toLocaleString(undefined, { maximumSignificantDigits: 2 });
}

/** A unit an axis can show its values in: its name, and how many of the series' own
 * units make one of it. */
export interface Unit { name: string; size: number }

/** The unit of ``units`` (largest first) that values up to ``max`` read best in: the
 * largest that ``max`` is at least one of, else the smallest. */
export function unitFor(max: number, units: Unit[]): Unit {
  return units.find((unit) => max >= unit.size) ?? units[units.length - 1];
}

/** Compute units, for series in SCU-hours. */
export const SCU_UNITS: Unit[] = [
  { name: "SCU-hours", size: 1 }, { name: "SCU-minutes", size: 1 / 60 }, { name: "SCU-seconds", size: 1 / 3600 },
];
/** Sizes of state, for series in GiB. */
export const BYTE_UNITS: Unit[] = [
  { name: "GiB", size: 1 }, { name: "MiB", size: 2 ** -10 }, { name: "KiB", size: 2 ** -20 },
  { name: "bytes", size: 2 ** -30 },
];

/** A whole count (events), with the reader's digit grouping. */
export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  return Math.round(value).toLocaleString();
}

/** An amount of money in its currency: cents, and two significant digits for a cost
 * under a cent (a preview's), so it does not read as free. */
export function formatMoney(amount: number | null | undefined, currency: string): string {
  if (amount === null || amount === undefined || !Number.isFinite(amount)) return "—";
  const underACent = amount !== 0 && Math.abs(amount) < 0.01;
  return new Intl.NumberFormat(undefined, underACent
    ? { style: "currency", currency, maximumSignificantDigits: 2 }
    : { style: "currency", currency, minimumFractionDigits: 2, maximumFractionDigits: 2 }).format(amount);
}

/** ``part`` as a whole percentage of ``whole``, rounded down (0.29 of 1 is 29, not 28). */
export function percentOf(part: number, whole: number): number {
  return whole > 0 ? Math.floor((part / whole) * 100 + 1e-9) : 0;
}

export function formatTime(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : "—";
}

const DURATION_UNITS: [number, string][] = [
  [86_400_000_000, "d"], [3_600_000_000, "h"], [60_000_000, "min"], [1_000_000, "s"], [1_000, "ms"],
];

/** A duration in microseconds as SQL would say it: 5 s, 1 min, 1 h 30 min, 250 ms. */
export function formatDuration(us: number): string {
  if (us <= 0) return "0 s";
  const parts: string[] = [];
  let rest = us;
  for (const [size, unit] of DURATION_UNITS) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)} ${unit}`);
      rest %= size;
    }
    if (parts.length === 2) break;
  }
  if (rest > 0 && parts.length === 0) parts.push(`${rest} µs`);
  return parts.join(" ");
}

/** The first line of a message; the rest (a trace, a plan) goes in a detail view. */
export function firstLine(message: string): string {
  return message.trim().split("\n", 1)[0];
}

// What the API writes for a timestamp: ISO 8601 in UTC, with microseconds.
const ISO_TIMESTAMP = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?Z?$/;

/** ``2026-11-25T09:30:52.250000Z`` as ``2026-11-25 09:30:52.25`` (UTC, as the data is). */
function formatTimestamp(text: string): string | null {
  const match = ISO_TIMESTAMP.exec(text);
  if (!match) return null;
  const fraction = (match[3] ?? "").replace(/0+$/, "");
  return `${match[1]} ${match[2]}${fraction === "." ? "" : fraction}`;
}

/** A window's bounds, ``2026-11-25 09:30:52 – 09:30:53``; the end's date only when it
 * differs from the start's. */
function formatWindow(start: string, end: string): string | null {
  const from = formatTimestamp(start);
  const to = formatTimestamp(end);
  if (from === null || to === null) return null;
  const sameDay = from.slice(0, 10) === to.slice(0, 10);
  return `${from} – ${sameDay ? to.slice(11) : to}`;
}

/** One value of a preview row as text: windows and timestamps as times, other
 * structs and arrays as JSON. */
export function formatCell(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return formatTimestamp(value) ?? value;
  if (typeof value !== "object") return String(value);
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 2 && typeof record.start === "string" && typeof record.end === "string") {
    const window = formatWindow(record.start, record.end);
    if (window !== null) return window;
  }
  return JSON.stringify(value);
}
