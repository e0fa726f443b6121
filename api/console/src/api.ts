// The console's client of Spate's public REST API (/api/v1): bearer-key requests,
// the one error shape, files such as an invoice's CSV, and the preview's server-sent
// events read from a fetch stream (neither a link nor EventSource can send an
// Authorization header).

import { forgetKey, storedKey } from "./session";

export const API = "/api/v1";

export interface Caller { tenant_id: string; tenant: string; key_id: string; key_name: string; role: string }
export interface Diagnostic { severity: string; message: string; line: number; column: number }
export interface PlanNode {
  id: string; kind: string; label: string; runs_on: "spark" | "spate"; detail: Record<string, unknown>;
}
export interface PlanGraph { bounded: boolean; nodes: PlanNode[]; edges: { source: string; target: string }[]; explain: string }
/** What becomes of one stateful operator's state under new SQL (POST /pipelines/{name}/plan-update). */
export interface OperatorState {
  operator: string; kind: string; label: string; status: "kept" | "changed" | "removed" | "new"; reasons: string[];
}
export interface StatePlan {
  verdict: "compatible" | "incompatible"; state_version: number | null; operators: OperatorState[];
  dropped: OperatorState[]; message: string;
}
export interface Validation { valid: boolean; diagnostics: Diagnostic[]; plan: PlanGraph | null; state?: StatePlan | null }
export interface JobSummary extends JobStateFlags {
  id: string; state: string; parallelism: number; started_at: string | null; last_epoch: number | null;
  failure_message: string | null; rows_in_per_s: number | null; rows_out_per_s: number | null;
  /** When an idle job's pipeline resumes by itself (its sources have input again). */
  resumes_at: string | null;
}
/** What the API says a job's state means: it has not ended; its rates are its latest epoch's. */
export interface JobStateFlags { active: boolean; live: boolean }
/** The parallelism range the autoscaler keeps a pipeline in, and its latest decision. */
export interface Autoscale { min: number; max: number; last_decision: string | null; last_decision_at: string | null }
export interface Pipeline {
  id: string; name: string; description: string; parallelism: number; version: number; sql: string;
  desired_state: string; stop_mode: string | null; restart_generation: number; job: JobSummary | null;
  autoscale: Autoscale | null;
}
export interface PipelineVersion { version: number; sql: string; created_at: string }
export interface Job extends JobStateFlags {
  id: string; state: string; pipeline_version: number | null; parallelism: number; restart_generation: number;
}
/** One operator's rows in the latest epoch, and its rates and busy ratio over the job's last minute. */
export interface OperatorMetrics {
  operator: string; kind: string | null; rows_in: number | null; rows_out: number | null;
  rows_in_per_s: number | null; rows_out_per_s: number | null; busy_ratio: number | null;
}
export interface JobMetrics {
  job_id: string; state: string; epoch: number | null; rows_in: number | null; rows_out: number | null;
  rows_in_per_s: number | null; rows_out_per_s: number | null; duration_ms: number | null;
  backpressure: number | null; watermark_us: number | null; watermark_lag_s: number | null;
  state_bytes: number | null; operators: OperatorMetrics[];
}
export interface Checkpoint { epoch: number; committed_at: string; duration_ms: number; state_bytes: number; rows_in: number; rows_out: number }
export interface JobError { at: string; message: string; detail: string }
export interface ApiKey { id: string; name: string; role: string; prefix: string; created_at: string; revoked_at: string | null }
export interface ApiKeyCreated extends ApiKey { key: string }
export interface Profile {
  id: string; name: string; connector: string; config: Record<string, string>; secrets: Record<string, string>;
}
export interface ConnectionTable {
  id: string; name: string; connector: string; profile: string | null; role: string; bounded: boolean;
  config: Record<string, string>; secrets: Record<string, string>;
  fields: { name: string; type: string; nullable: boolean }[];
}
/** A WITH option a connector declares: which roles of table take it, and whether it is a credential. */
/** A WITH option as its connector declares it (the SQL reference's tables say the same). */
export interface ConnectorOption {
  name: string; roles: string[]; secret: boolean;
  kind: "text" | "integer" | "number" | "boolean" | "choice" | "duration" | "size";
  required: boolean; required_when: string | null;
  default: string | null; default_text: string | null; choices: string[];
  description: string;
}
export interface ConnectorInfo { name: string; roles: string[]; options: ConnectorOption[] }
export interface Check { ok: boolean; message: string }
export interface UdfVersionSummary { version: number; kind: string; signature: string; source_sha256: string; created_at: string }
/** A stored UDF: its current version's source and signature, and every version. */
export interface Udf {
  id: string; name: string; version: number; kind: string; signature: string; source: string;
  created_at: string; updated_at: string; versions: UdfVersionSummary[];
}
export interface UdfValidation { valid: boolean; diagnostics: Diagnostic[]; kind: string | null; signature: string | null }
export interface Page<T> { items: T[]; next_cursor: string | null }
export interface UsageItem {
  period_start: string; tenant_id: string; pipeline_id: string | null; pipeline_name: string | null;
  /** The pipeline no longer exists: its usage stays, under the name it had. */
  pipeline_deleted: boolean;
  dimension: string; quantity: number; cost: number;
}
export interface Usage {
  granularity: "day" | "minute"; start: string; end: string; items: UsageItem[];
  totals: Record<string, number>; currency: string; total_cost: number; units: Record<string, string>;
}
export interface InvoiceSummary { period: string; state: "open" | "closed"; currency: string; total: number; closed_at: string | null }
export interface InvoiceLine {
  pipeline_id: string | null; pipeline_name: string | null; dimension: string; unit: string;
  quantity: number; unit_price: number; amount: number; price_book_version: string;
}
export interface Invoice extends InvoiceSummary { tenant_id: string; price_book_versions: string[]; lines: InvoiceLine[] }
export interface BudgetAlert { period: string; threshold: number; kind: "threshold" | "hard_stop"; cost: number; at: string }
export interface Budget {
  amount: number; currency: string; thresholds: number[]; hard_stop: boolean; period: string; spent: number;
  alerts: BudgetAlert[];
}
export interface Estimate {
  pipeline: string; parallelism: number; compute_units: number; cost_per_hour: number; cost_per_month: number;
  currency: string; basis: string;
}
export interface QuotaLimit { limit: string; value: number | null; current: number | null }
export interface Quotas { tenant_id: string; plan: string; limits: QuotaLimit[] }

/** An error answer of the API, with its code, message and details. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string,
              readonly details: Record<string, unknown>[] = []) {
    super(message);
  }
}

/** Called when the key stops working (revoked, or never valid): back to sign-in. */
let onUnauthenticated: () => void = () => undefined;
export function whenUnauthenticated(handler: () => void): void {
  onUnauthenticated = handler;
}

function headers(apiKey: string | null, json: boolean): HeadersInit {
  const result: Record<string, string> = { Accept: "application/json" };
  if (apiKey) result.Authorization = `Bearer ${apiKey}`;
  if (json) result["Content-Type"] = "application/json";
  return result;
}

async function errorOf(response: Response): Promise<ApiError> {
  try {
    const body = await response.json();
    const error = body?.error ?? {};
    return new ApiError(response.status, error.code ?? "error",
      error.message ?? response.statusText, error.details ?? []);
  } catch {
    return new ApiError(response.status, "error", `${response.status} ${response.statusText}`);
  }
}

/** Send a request; the decoded JSON answer (undefined for 204), or an ApiError. */
export async function request<T>(method: string, path: string, body?: unknown,
                                 apiKey: string | null = storedKey()): Promise<T> {
  const response = await fetch(API + path, {
    method,
    headers: headers(apiKey, body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401 && apiKey === storedKey()) {
      forgetKey();
      onUnauthenticated();
    }
    throw error;
  }
  return (response.status === 204 ? undefined : await response.json()) as T;
}

export const get = <T>(path: string) => request<T>("GET", path);
export const post = <T>(path: string, body?: unknown) => request<T>("POST", path, body ?? {});
export const patch = <T>(path: string, body: unknown) => request<T>("PATCH", path, body);
export const put = <T>(path: string, body: unknown) => request<T>("PUT", path, body);
export const del = (path: string) => request<void>("DELETE", path);

/** A file the API serves (an invoice's CSV): fetched with the key, since a plain link
 * cannot send the Authorization header. The file's name is the server's, else ``fallbackName``. */
export async function getFile(path: string, fallbackName: string): Promise<{ blob: Blob; name: string }> {
  const response = await fetch(API + path, { headers: { ...headers(storedKey(), false), Accept: "*/*" } });
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401) {
      forgetKey();
      onUnauthenticated();
    }
    throw error;
  }
  const named = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") ?? "");
  return { blob: await response.blob(), name: named?.[1] ?? fallbackName };
}

export interface StreamEvent { event: string; data: unknown }

/** POST ``body`` to ``path`` and hand each server-sent event to ``onEvent`` until the
 * stream ends or ``signal`` aborts it. */
export async function postEventStream(path: string, body: unknown, signal: AbortSignal,
                                      onEvent: (event: StreamEvent) => void): Promise<void> {
  const response = await fetch(API + path, {
    method: "POST",
    headers: { ...headers(storedKey(), true), Accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
  if (!response.ok || !response.body) throw await errorOf(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const parsed = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (parsed) onEvent(parsed);
    }
  }
}

/** One SSE block: ``event:`` and ``data:`` lines; comments (keep-alives) are skipped. */
function parseEvent(block: string): StreamEvent | null {
  let event = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "event") event = value;
    else if (name === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { event, data: JSON.parse(data.join("\n")) };
}

/** A person-readable account of a failed request: the message, and where it points. */
export function describe(error: unknown): string {
  if (!(error instanceof ApiError)) return error instanceof Error ? error.message : String(error);
  const located = error.details.find((d) => typeof d.line === "number");
  if (located) {
    return error.message.includes("line") ? error.message
      : `${error.message} (line ${located.line}, column ${located.column})`;
  }
  // Request validation errors name the field ("body.fields.0.name") and what is wrong.
  const fields = error.details.filter((d) => typeof d.message === "string" && typeof d.location === "string")
    .map((d) => `${fieldOf(String(d.location))}: ${String(d.message)}`);
  return fields.length ? `${error.message}: ${fields.join("; ")}` : error.message;
}

/** ``body.fields.0.name`` as ``fields 1 name``: where in the form the problem is. */
function fieldOf(location: string): string {
  const parts = location.split(".").filter((part) => part !== "body" && part !== "query");
  return parts.map((part) => /^\d+$/.test(part) ? String(Number(part) + 1) : part).join(" ") || "request";
}
