// The HOQS console: runs queries and keeps the recent ones for as long as the tab is open.
export { columns, formatValue, underline, offsetOf, plural } from "./lib.js";
import { api } from "./lib.js";

const HISTORY_KEY = "hf.console.queries";
const MAX_HISTORY = 20;

/** The recent queries of this tab, newest first. */
export function history(): string[] {
  try {
    const list = JSON.parse(sessionStorage.getItem(HISTORY_KEY) || "[]");
    return Array.isArray(list) ? list.filter((q) => typeof q === "string") : [];
  } catch {
    return [];
  }
}

/** Puts `query` first in the history (once) and returns the new history. */
export function remember(query: string): string[] {
  const list = [query, ...history().filter((q) => q !== query)].slice(0, MAX_HISTORY);
  sessionStorage.setItem(HISTORY_KEY, JSON.stringify(list));
  return list;
}

/** `POST /data/query`, timed. */
export async function runQuery(query: string) {
  const started = performance.now();
  const reply = await api("POST", "/data/query", { query });
  return { reply, elapsed: Math.round(performance.now() - started) };
}

/** True for values a table aligns right (numbers and exact decimals). */
export function numeric(value: unknown): boolean {
  return typeof value === "number" || (typeof value === "string" && /^-?\d+(\.\d+)?$/.test(value));
}

export const EXAMPLE = "SELECT name, industry FROM crm.account ORDER BY name LIMIT 20";
