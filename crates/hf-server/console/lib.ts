// What every console screen shares: the session (the logged-in principal's token), the one
// function that calls the hf API, and formatting for people.
//
// The token lives in this module and in sessionStorage (it survives a reload of the tab and
// dies with it), never in localStorage.
import { configure } from "hfx";

/** One entry of the hf error envelope. */
export interface ApiError {
  code: string;
  message: string;
  scope: string;
  target: string | null;
  rule?: string;
  location?: { line: number; column: number; frame: string };
}

/** The answer of an API call: never thrown, so screens show errors instead of crashing. */
export interface Reply {
  ok: boolean;
  status: number;
  data: any;
  errors: ApiError[];
  etag: string | null;
}

/** The logged-in principal. */
export interface Session {
  token: string;
  expiresAt: number;
  id: string;
  name: string;
  isAdmin: boolean;
}

const STORAGE_KEY = "hf.console.session";
let current: Session | null = null;
let expired: (() => void) | null = null;

/** The session kept in this tab, if it has not expired. */
export function restoreSession(): Session | null {
  try {
    const saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "null");
    if (saved && typeof saved.token === "string" && saved.expiresAt > Date.now()) {
      useSession(saved);
      return saved;
    }
  } catch {
    // A damaged entry is the same as none.
  }
  sessionStorage.removeItem(STORAGE_KEY);
  return null;
}

/** Starts using `session` for every call, and keeps it for reloads of this tab. */
export function useSession(session: Session): void {
  current = session;
  configure({ token: session.token });
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
}

/** Forgets the session. */
export function endSession(): void {
  current = null;
  configure({ token: null });
  sessionStorage.removeItem(STORAGE_KEY);
}

/** `handler` runs when the service refuses the session's token (expired, principal deleted). */
export function onExpired(handler: () => void): void {
  expired = handler;
}

/** Logs in with a token answer (`{token, expiresIn}`): asks who we are and starts the session. */
export async function startSession(answer: { token: string; expiresIn: number }): Promise<Reply> {
  configure({ token: answer.token });
  const me = await api("GET", "/auth/me", undefined, { authorization: "Bearer " + answer.token });
  if (!me.ok) {
    configure({ token: null });
    return me;
  }
  useSession({
    token: answer.token,
    expiresAt: Date.now() + answer.expiresIn * 1000,
    id: me.data.id,
    name: me.data.pgRole,
    isAdmin: !!me.data.isAdmin,
  });
  return me;
}

/** Calls the hf API with the session's token. Resolves to a [`Reply`], never throws. */
export async function api(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> {
  const sent: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) sent["content-type"] = "application/json";
  if (current) sent.authorization = "Bearer " + current.token;
  Object.assign(sent, headers || {});
  let res: Response;
  try {
    res = await fetch(path, { method, headers: sent, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    return failure(0, "NETWORK_ERROR", "The service could not be reached. Is it running?");
  }
  let data: any = null;
  if (res.status !== 204) {
    try {
      data = await res.json();
    } catch {
      data = null;
    }
  }
  if (res.ok) return { ok: true, status: res.status, data, errors: [], etag: res.headers.get("etag") };
  if (res.status === 401 && current && sent.authorization === "Bearer " + current.token && expired) expired();
  const errors = data && Array.isArray(data.errors) ? data.errors : [{ code: "HTTP_" + res.status, message: res.statusText || "HTTP " + res.status, scope: "request", target: null }];
  return { ok: false, status: res.status, data, errors, etag: null };
}

/**
 * The name of the live branch, as `GET /branches` reports it: a deployment names it
 * (`main` unless told otherwise), so writes meant for the live branch ask rather than assume.
 * A [`Reply`] with the errors when the list cannot be read.
 */
export async function liveBranch(): Promise<{ name: string } | Reply> {
  const reply = await api("GET", "/branches");
  if (!reply.ok) return reply;
  const live = (reply.data as { branch: string; live: boolean }[]).find((b) => b.live);
  return live ? { name: live.branch } : failure(0, "NO_LIVE_BRANCH", "The service reports no live branch.");
}

function failure(status: number, code: string, message: string): Reply {
  return { ok: false, status, data: null, errors: [{ code, message, scope: "request", target: null }], etag: null };
}

/** The messages of the errors that are not about one field, or all of them. */
export function messages(errors: ApiError[]): string[] {
  return errors.filter((e) => e.scope !== "field").map((e) => e.message);
}

/** The errors not about one field, each with its code: `The branch moved on (BRANCH_DIVERGED)`. */
export function described(errors: ApiError[]): string[] {
  return errors.filter((e) => e.scope !== "field").map((e) => (e.code ? e.message + " (" + e.code + ")" : e.message));
}

/** What an apply did, from its `apply` counts: `3 statements: 1 table created, 2 columns added`. */
export function appliedCounts(a: { ddlExecuted: number; tablesCreated: number; columnsAdded: number }): string {
  return plural(a.ddlExecuted, "statement") + ": " + plural(a.tablesCreated, "table") + " created, " + plural(a.columnsAdded, "column") + " added";
}

/** Field key → message, for errors about one field. */
export function fieldErrors(errors: ApiError[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of errors) {
    if (e.scope === "field" && e.target) out[e.target] = out[e.target] ? out[e.target] + " " + e.message : e.message;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Formatting for people

const numbers = new Intl.NumberFormat(undefined, { maximumFractionDigits: 6 });
const dates = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });
const times = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;
const DECIMAL = /^-?\d+(\.\d+)?$/;

/** Groups the digits of an exact decimal string without rounding it through a float. */
export function formatDecimal(text: string): string {
  const negative = text.startsWith("-");
  const [whole, fraction] = (negative ? text.slice(1) : text).split(".");
  const grouped = numbers.format(Number(whole));
  const point = numbers.format(1.5).charAt(1);
  // Trailing zeros say nothing to a reader (`6250.2500` is `6,250.25`); the stored value keeps them.
  const shown = (fraction || "").replace(/0+$/, "");
  return (negative ? "-" : "") + (Number(whole) > Number.MAX_SAFE_INTEGER ? whole : grouped) + (shown ? point + shown : "");
}

/** A value as a person reads it: numbers grouped, dates in the reader's locale, JSON compact. */
export function formatValue(value: unknown): string {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") return numbers.format(value);
  if (typeof value === "boolean") return value ? "Yes" : "No";
  if (typeof value === "string") {
    if (DATE.test(value)) {
      const [y, m, d] = value.split("-").map(Number);
      return dates.format(new Date(y, m - 1, d));
    }
    if (DATETIME.test(value)) {
      const when = new Date(value);
      return isNaN(when.getTime()) ? value : times.format(when);
    }
    if (DECIMAL.test(value) && value.includes(".")) return formatDecimal(value);
    return value;
  }
  return JSON.stringify(value);
}

/** A count with its noun: `1 record`, `1,204 records`. */
export function plural(n: number, one: string, many?: string): string {
  return numbers.format(n) + " " + (n === 1 ? one : many || one + "s");
}

/** A timestamp as a person reads it. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const when = new Date(iso);
  return isNaN(when.getTime()) ? iso : times.format(when);
}

/** The keys of a list of records, in the order they first appear. */
export function columns(records: Record<string, unknown>[]): string[] {
  const seen: string[] = [];
  for (const r of records) for (const k of Object.keys(r)) if (!seen.includes(k)) seen.push(k);
  return seen;
}

/** A located error split around its column, to underline the offending part of the line. */
export function underline(location: { column: number; frame: string }): { before: string; at: string; after: string } {
  const frame = location.frame || "";
  const start = Math.max(0, Math.min(frame.length, location.column - 1));
  let end = start;
  while (end < frame.length && /[A-Za-z0-9_.$:']/.test(frame[end])) end++;
  if (end === start) end = Math.min(frame.length, start + 1);
  return { before: frame.slice(0, start), at: frame.slice(start, end) || " ", after: frame.slice(end) };
}

/** The UTF-16 offset of a 1-based line and column in `text`, to put the caret there. */
export function offsetOf(text: string, line: number, column: number): number {
  let offset = 0;
  for (let i = 1; i < line; i++) {
    const next = text.indexOf("\n", offset);
    if (next < 0) break;
    offset = next + 1;
  }
  return Math.min(text.length, offset + column - 1);
}
