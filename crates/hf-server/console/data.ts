// The Data area: any object's records, paged, sorted and filtered on the server through HOQS,
// and a record editor that writes through /data with If-Match.
export { formatValue, plural, messages, fieldErrors } from "./lib.js";
import { createKeys } from "hfx";
import { api } from "./lib.js";
import type { Reply } from "./lib.js";

/** Rows per page. */
export const PAGE_SIZE = 25;

export interface Field {
  moduleKey: string;
  objectKey: string;
  fieldKey: string;
  fieldKind: string;
  label: string;
  fieldType: string | null;
  lookupTarget: string | null;
  required: boolean;
  /** A picklist's or multi-select picklist's choices. */
  values?: { key: string; label: string }[] | null;
}

/** Every object of the live branch, for the object list. */
export async function loadObjects(): Promise<Reply> {
  return api("GET", "/metadata/objects");
}

function path(m: string, o: string): string {
  return encodeURIComponent(m) + "/objects/" + encodeURIComponent(o);
}

/**
 * An object and its effective fields: the fields of its ancestors (through `extends`) first, then
 * its own, as records carry them.
 */
export async function loadObject(m: string, o: string) {
  const chain: any[] = [];
  let target: string | null = m + "." + o;
  while (target && chain.length < 16) {
    const [tm, to] = target.split(".");
    const reply = await api("GET", "/metadata/" + path(tm, to));
    if (!reply.ok) return { object: null, fields: [], errors: reply.errors };
    chain.unshift(reply.data);
    target = reply.data.extends || null;
  }
  const fields: Field[] = [];
  for (const object of chain) {
    const reply = await api("GET", "/metadata/" + path(object.moduleKey, object.objectKey) + "/fields");
    if (!reply.ok) return { object: null, fields: [], errors: reply.errors };
    for (const f of reply.data) if (!fields.some((x) => x.fieldKey === f.fieldKey)) fields.push(f);
  }
  return { object: chain[chain.length - 1], fields, errors: [] };
}

/** True for fields whose value a person types (scalars and lookups, not formulas or rollups). */
export function editable(f: Field): boolean {
  return f.fieldKind === "scalar" || f.fieldKind === "lookup";
}

/** The type of a field's value: lookups hold ids. */
function typeOf(f: Field): string {
  return f.fieldKind === "lookup" ? "uuid" : f.fieldType || "text";
}

/**
 * The filter's condition and parameter for `text` typed into the filter of field `f`, or why
 * that text cannot filter it. Text is found anywhere in the value, `%` and `_` as themselves;
 * a lookup whose target has a name is filtered by that name (`names` holds the paths).
 */
function condition(f: Field, text: string, names: Record<string, string>): { where: string; value: unknown } | { error: string } {
  const type = typeOf(f);
  const contains = (path: string) => ({ where: path + " ILIKE :filter", value: "%" + text.replace(/[\\%_]/g, (c) => "\\" + c) + "%" });
  if (type === "text") return contains(f.fieldKey);
  if (f.fieldKind === "lookup" && !/^[0-9a-f-]{36}$/i.test(text.trim())) {
    if (names[f.fieldKey]) return contains(names[f.fieldKey]);
    return { error: "Enter the id of a " + f.lookupTarget + " record to filter " + f.fieldKey + " by." };
  }
  if (type === "boolean") return { where: f.fieldKey + " = :filter", value: /^(true|yes|1)$/i.test(text.trim()) };
  // Other values are read as the editor reads them (a number, a decimal, a datetime, …).
  const read = fromInput(f, text.trim());
  if (read.error) return { error: read.error.replace(/\.$/, "") + " to filter " + f.fieldKey + " by." };
  return { where: f.fieldKey + " = :filter", value: read.value };
}

export interface Page {
  fields: Field[];
  /** Lookup field key → the path of the target's naming field (`account` → `account.name`). */
  names: Record<string, string>;
  sort: string;
  descending: boolean;
  filterField: string;
  filterText: string;
  /** Read from the end: the order reversed (and each page turned round for showing). */
  backward: boolean;
  /** The query API's keyset cursor of the page (`null`: the first page in that direction). */
  cursor: string | null;
}

/**
 * One page of records, the cursor of the page after it (`null` on the last one) and the number of
 * records the filter matches, in two HOQS queries.
 *
 * Pages are read with the query API's keyset cursor, not `OFFSET`: a page starts after the last
 * row of the one before it, so records others insert or delete meanwhile never make a row show
 * twice or not at all, and a page deep into 100,000 rows costs what the first does (PostgreSQL
 * does not walk past the rows before it). The last pages are read from the end, in the reverse
 * order, and turned round.
 */
export async function loadPage(m: string, o: string, page: Page) {
  const keys = page.fields.map((f) => f.fieldKey);
  let where = "";
  const params: Record<string, unknown> = {};
  const filtered = page.fields.find((f) => f.fieldKey === page.filterField);
  if (filtered && page.filterText.trim() !== "") {
    const c = condition(filtered, page.filterText, page.names);
    if ("error" in c) return { records: [], next: null, total: 0, errors: [{ code: "INVALID_FILTER", message: c.error, scope: "request", target: null }], query: "" };
    where = " WHERE " + c.where;
    params.filter = c.value;
  }
  const from = " FROM " + m + "." + o + where;
  const descending = page.backward ? !page.descending : page.descending;
  const tieBreak = descending ? ", id DESC" : ", id ASC";
  const order = " ORDER BY " + page.sort + (descending ? " DESC" : " ASC") + (page.sort === "id" ? "" : tieBreak);
  const query = "SELECT " + ["id", ...keys, ...Object.values(page.names), "updatedAt"].join(", ") + from + order + " LIMIT " + PAGE_SIZE;
  const [rows, count] = await Promise.all([
    api("POST", "/data/query", { query, params, cursor: page.cursor }),
    api("POST", "/data/query", { query: "SELECT COUNT(id) AS total" + from, params }),
  ]);
  if (!rows.ok) return { records: [], next: null, total: 0, errors: rows.errors, query };
  const records = page.backward ? rows.data.records.slice().reverse() : rows.data.records;
  const next: string | null = rows.data.nextCursor || null;
  return { records, next, total: count.ok ? count.data.records[0].total : records.length, errors: [], query };
}

/** For each lookup field, the path that names its target record (`account.name`), when the target has such a field. */
export async function lookupNames(fields: Field[]): Promise<Record<string, string>> {
  const names: Record<string, string> = {};
  for (const f of fields) {
    if (f.fieldKind !== "lookup" || !f.lookupTarget) continue;
    const named = await labelField(f.lookupTarget);
    if (named) names[f.fieldKey] = f.fieldKey + "." + named.fieldKey;
  }
  return names;
}

/** What an input shows for a stored value. */
export function toInput(f: Field, value: unknown): unknown {
  if (value === null || value === undefined) return typeOf(f) === "boolean" ? false : "";
  const type = typeOf(f);
  if (type === "boolean") return !!value;
  if (type === "json") return JSON.stringify(value, null, 2);
  if (type === "multipicklist" && Array.isArray(value)) return value.join(", ");
  if (type === "datetime" && typeof value === "string") {
    const d = new Date(value);
    if (isNaN(d.getTime())) return value;
    const pad = (n: number) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
  }
  return String(value);
}

/**
 * What a save sends: every field the form holds for a new record (empty ones left out), and
 * for an existing one only the fields whose input changed since it was loaded, so a save never
 * rewrites a value the person did not touch (an input shows some values less exactly than they
 * are stored: a datetime to the minute, a large integer or a JSON number as JavaScript reads
 * it). `errors` holds what an input cannot be, by field.
 */
export function changes(fields: Field[], draft: Record<string, unknown>, loaded: Record<string, unknown> | null): { body: Record<string, unknown>; errors: Record<string, string> } {
  const body: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  for (const f of fields) {
    if (!editable(f)) continue;
    if (loaded !== null && draft[f.fieldKey] === loaded[f.fieldKey]) continue;
    const read = fromInput(f, draft[f.fieldKey]);
    if (read.error) errors[f.fieldKey] = read.error;
    else if (!(loaded === null && read.value === null)) body[f.fieldKey] = read.value;
  }
  return { body, errors };
}

/**
 * The value to send for what an input holds; `{error}` when it cannot be one (shown next to the
 * input before anything is sent).
 */
export function fromInput(f: Field, input: unknown): { value?: unknown; error?: string } {
  const type = typeOf(f);
  if (type === "boolean") return { value: !!input };
  const text = input === null || input === undefined ? "" : String(input);
  if (text.trim() === "") return { value: null };
  switch (type) {
    case "integer":
      return /^-?\d+$/.test(text.trim()) ? { value: Number(text.trim()) } : { error: "Enter a whole number." };
    case "float":
      return isNaN(Number(text)) ? { error: "Enter a number." } : { value: Number(text) };
    case "decimal":
      return /^-?\d+(\.\d+)?$/.test(text.trim()) ? { value: text.trim() } : { error: "Enter a number such as 1250.50." };
    case "json":
      try {
        return { value: JSON.parse(text) };
      } catch {
        return { error: "Enter valid JSON." };
      }
    case "datetime": {
      const d = new Date(text);
      return isNaN(d.getTime()) ? { error: "Enter a date and time." } : { value: d.toISOString() };
    }
    case "multipicklist":
      return { value: text.split(",").map((key) => key.trim()).filter((key) => key !== "") };
    default:
      return { value: text };
  }
}

/** The HTML input type for a field. */
export function inputType(f: Field): string {
  const type = typeOf(f);
  if (type === "date") return "date";
  if (type === "datetime") return "datetime-local";
  return "text";
}

/** `inputmode` hint for touch keyboards. */
export function inputMode(f: Field): string | null {
  const type = typeOf(f);
  if (type === "integer") return "numeric";
  if (type === "decimal" || type === "float") return "decimal";
  return null;
}

export async function loadRecord(m: string, o: string, id: string): Promise<Reply> {
  return api("GET", "/data/" + encodeURIComponent(m) + "/" + encodeURIComponent(o) + "/" + encodeURIComponent(id));
}

/** The key of a create not known to have been made (see the runtime's `createKeys`). */
const createKey = createKeys();

/** Creates (`id` null) or updates a record; updates name the version that was loaded. */
export async function saveRecord(m: string, o: string, id: string | null, body: Record<string, unknown>, etag: string | null): Promise<Reply> {
  const base = "/data/" + encodeURIComponent(m) + "/" + encodeURIComponent(o);
  if (id !== null) return api("PATCH", base + "/" + encodeURIComponent(id), body, etag ? { "if-match": etag } : {});
  const key = createKey.keyFor(base + " " + JSON.stringify(body));
  const reply = await api("POST", base, body, { "idempotency-key": key });
  if (reply.ok) createKey.made();
  return reply;
}

export async function deleteRecord(m: string, o: string, id: string): Promise<Reply> {
  return api("DELETE", "/data/" + encodeURIComponent(m) + "/" + encodeURIComponent(o) + "/" + encodeURIComponent(id));
}

/** The field that names a target's records (`name`, else its first text field), asked once. */
const labelFields = new Map<string, Promise<Field | undefined>>();
function labelField(target: string): Promise<Field | undefined> {
  let found = labelFields.get(target);
  if (!found) {
    const [m, o] = target.split(".");
    found = loadObject(m, o).then(({ fields }) => fields.find((f: Field) => f.fieldKey === "name") || fields.find((f: Field) => f.fieldKind === "scalar" && f.fieldType === "text"));
    labelFields.set(target, found);
  }
  return found;
}

/**
 * Choices for a lookup field: up to 20 records of the target whose first text field contains
 * `term`, as `{id, label}`.
 */
export async function lookupChoices(target: string, term: string) {
  const text = await labelField(target);
  if (!text) return [];
  const reply = await api("POST", "/data/query", {
    query: "SELECT id, " + text.fieldKey + " FROM " + target + " WHERE " + text.fieldKey + " ILIKE :term ORDER BY " + text.fieldKey + " LIMIT 20",
    params: { term: "%" + term + "%" },
  });
  return reply.ok ? reply.data.records.map((r: any) => ({ id: r.id, label: String(r[text.fieldKey] ?? r.id) })) : [];
}

/** True for values a table aligns right. */
export function numeric(value: unknown): boolean {
  return typeof value === "number" || (typeof value === "string" && /^-?\d+(\.\d+)?$/.test(value));
}

/** Objects grouped by module, for the side list. */
export function byModule(objects: any[]): { moduleKey: string; objects: any[] }[] {
  const groups: { moduleKey: string; objects: any[] }[] = [];
  for (const o of objects) {
    let g = groups.find((x) => x.moduleKey === o.moduleKey);
    if (!g) groups.push((g = { moduleKey: o.moduleKey, objects: [] }));
    g.objects.push(o);
  }
  return groups;
}
