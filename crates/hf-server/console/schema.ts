// The Schema area: branches, modules, objects and fields of any branch, writes to a branch, the
// plan of a branch against the live database and its apply, and the schema diagram.
export { formatValue, plural, messages, described, appliedCounts, fieldErrors, underline } from "./lib.js";
import { api } from "./lib.js";
import type { Reply } from "./lib.js";

export const SCALAR_TYPES = ["text", "integer", "decimal", "float", "boolean", "date", "datetime", "uuid", "json"];
/** The types only a scalar field may have: their values are one (or several) of its choices. */
export const CHOICE_TYPES = ["picklist", "multipicklist"];

/** A field's choices as the form edits them: one per line, `key: Label` (or a key alone). */
export function choicesText(values: { key: string; label: string }[] | null | undefined): string {
  return (values || []).map((v) => (v.label === v.key ? v.key : v.key + ": " + v.label)).join("\n");
}

/** The choices the form's text holds, in order; blank lines are skipped. */
export function parseChoices(text: string): { key: string; label: string }[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => {
      const colon = line.indexOf(":");
      if (colon < 0) return { key: line, label: line };
      return { key: line.slice(0, colon).trim(), label: line.slice(colon + 1).trim() };
    });
}
export const FIELD_KINDS = ["scalar", "formula", "lookup", "rollup"];
export const ROLLUP_FUNCTIONS = ["count", "sum", "min", "max", "avg"];
const BRANCH = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const KEY = /^[a-z][a-z0-9_]{0,62}$/;

/** A message when `name` cannot be a branch id, or "". */
export function branchProblem(name: string): string {
  if (!BRANCH.test(name) || name.includes("..") || name.endsWith(".lock") || name.endsWith(".")) return "Use letters, digits, `.`, `_` and `-`, starting with a letter or digit.";
  return "";
}

/** A message when `key` cannot be a module, object or field key, or "". */
export function keyProblem(key: string): string {
  return KEY.test(key) ? "" : "Use lower-case letters, digits and `_`, starting with a letter.";
}

let flashed = "";

/** Keeps a message for the next Schema area, which shows it once (the area is re-created when the address changes). */
export function flash(message: string): void {
  flashed = message;
}

export function takeFlash(): string {
  const message = flashed;
  flashed = "";
  return message;
}

export async function loadBranches(): Promise<Reply> {
  return api("GET", "/branches");
}

/** The read root of a branch: a branch that does not exist yet shows the live metadata. */
function readRoot(branch: string, exists: boolean): string {
  return exists ? "/metadata@" + encodeURIComponent(branch) : "/metadata";
}

/** Modules, objects and fields of a branch, in three reads. */
export async function loadSchema(branch: string, exists: boolean) {
  const root = readRoot(branch, exists);
  const [modules, objects, fields] = await Promise.all([api("GET", root), api("GET", root + "/objects"), api("GET", root + "/fields")]);
  const failed = [modules, objects, fields].find((r) => !r.ok);
  if (failed) return { modules: [], objects: [], fields: [], errors: failed.errors };
  return { modules: modules.data, objects: objects.data, fields: fields.data, errors: [] };
}

function writePath(branch: string, ...parts: string[]): string {
  return "/metadata@" + encodeURIComponent(branch) + "/" + parts.map(encodeURIComponent).join("/");
}

/**
 * The query of a write: `allowDestructive` when the person said so, and `dryRun` for a write that
 * commits nothing and answers what the real one would (the checks as an expression is typed).
 */
function writeQuery(allow: boolean, dryRun: boolean): string {
  const parts = [allow ? "allowDestructive=true" : "", dryRun ? "dryRun=true" : ""].filter(Boolean);
  return parts.length ? "?" + parts.join("&") : "";
}

export async function writeModule(branch: string, method: string, m: string, body?: unknown, allow = false): Promise<Reply> {
  return api(method, writePath(branch, m) + writeQuery(allow, false), body);
}

export async function writeObject(branch: string, method: string, m: string, o: string, body?: unknown, allow = false, dryRun = false): Promise<Reply> {
  return api(method, writePath(branch, m, "objects", o) + writeQuery(allow, dryRun), body);
}

export async function writeField(branch: string, method: string, m: string, o: string, f: string, body?: unknown, allow = false, dryRun = false): Promise<Reply> {
  return api(method, writePath(branch, m, "objects", o, "fields", f) + writeQuery(allow, dryRun), body);
}

/** The body of an object write: everything a `PUT` replaces. */
export function objectBody(o: any, rules: Record<string, unknown>) {
  const body: Record<string, unknown> = { label: o.label, rules, isAbstract: !!o.isAbstract };
  if (o.description) body.description = o.description;
  if (o.extends) body.extends = o.extends;
  if (o.identityColor || o.identityIcon) body.identity = { ...(o.identityColor ? { color: o.identityColor } : {}), ...(o.identityIcon ? { icon: o.identityIcon } : {}) };
  return body;
}

/** The rules of an object as the write takes them. */
export function rulesOf(object: any): Record<string, unknown> {
  return object && object.rules ? { ...object.rules } : {};
}

/** An empty field form. */
export function newFieldForm() {
  return {
    fieldKey: "", fieldKind: "scalar", label: "", description: "", fieldType: "text", required: false, uniqueConstraint: false, indexed: false,
    formula: "", lookupTarget: "", rollupFunction: "count", source: "", field: "", filter: "", choices: "", defaultValue: null,
  };
}

/** A field form filled from a field as read. */
export function fieldForm(f: any) {
  return {
    ...newFieldForm(),
    fieldKey: f.fieldKey, fieldKind: f.fieldKind, label: f.label, description: f.description || "", fieldType: f.fieldType || "text",
    required: !!f.required, uniqueConstraint: !!f.uniqueConstraint, indexed: !!f.indexed, formula: f.formula || "", lookupTarget: f.lookupTarget || "",
    rollupFunction: f.rollupFunction || "count", source: f.source || "", field: f.field || "", filter: f.filter || "",
    choices: choicesText(f.values), defaultValue: f.defaultValue ?? null, loadedType: f.fieldType || "text",
  };
}

/** Whether the default value the field was read with still fits what the form holds. */
function keepsDefault(form: any): boolean {
  if (form.defaultValue === null || form.defaultValue === undefined || form.fieldType !== form.loadedType) return false;
  if (!CHOICE_TYPES.includes(form.fieldType)) return true;
  const keys = parseChoices(form.choices).map((c) => c.key);
  return String(form.defaultValue).split(";").every((key) => keys.includes(key));
}

/** The body of a field write: the variant `fieldKind` selects, with its own properties only. */
export function fieldBody(form: any) {
  const body: Record<string, unknown> = { label: form.label, fieldKind: form.fieldKind };
  if (form.description) body.description = form.description;
  switch (form.fieldKind) {
    case "scalar":
      Object.assign(body, { fieldType: form.fieldType, required: form.required, uniqueConstraint: form.uniqueConstraint, indexed: form.indexed });
      if (CHOICE_TYPES.includes(form.fieldType)) body.values = parseChoices(form.choices);
      // A write replaces the field: the default value, which the form does not edit, is sent
      // back as it was read, while it still fits (the same type, and for a picklist a key it
      // still has); otherwise it goes with the change that no longer fits it.
      if (keepsDefault(form)) body.defaultValue = form.defaultValue;
      break;
    case "formula":
      Object.assign(body, { formula: form.formula, fieldType: form.fieldType });
      break;
    case "lookup":
      Object.assign(body, { lookupTarget: form.lookupTarget, required: form.required, indexed: form.indexed });
      break;
    case "rollup":
      Object.assign(body, { rollupFunction: form.rollupFunction, source: form.source, fieldType: form.fieldType });
      if (form.field) body.field = form.field;
      if (form.filter) body.filter = form.filter;
      break;
  }
  return body;
}

/** The line and column a message names (`… (line 1, column 4) …`), or null. */
export function locationIn(message: string): { line: number; column: number } | null {
  const m = /\(line (\d+), column (\d+)\)/.exec(message || "");
  return m ? { line: Number(m[1]), column: Number(m[2]) } : null;
}

/**
 * What can be told about an expression (formula, rollup filter, rule) while it is typed, before
 * the service sees it: a text literal or a parenthesis left open, a `)` too many, an operator with
 * nothing after it. Only structure: names and types are the service's to check when the change is
 * saved. The answer ends with `(line L, column C)`, like the service's, so [`markAt`] underlines
 * it; "" when nothing is wrong.
 */
export function quickCheck(text: string): string {
  const at = (index: number, message: string) => {
    const before = text.slice(0, index);
    const line = before.split("\n").length;
    const column = index - (before.lastIndexOf("\n") + 1) + 1;
    return message + " (line " + line + ", column " + column + ")";
  };
  const open: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'") {
      let j = i + 1;
      while (j < text.length && !(text[j] === "'" && text[j + 1] !== "'")) j += text[j] === "'" ? 2 : 1;
      if (j >= text.length) return at(i, "This text is not closed: end it with a `'`.");
      i = j;
    } else if (c === "(") {
      open.push(i);
    } else if (c === ")") {
      if (open.length === 0) return at(i, "This `)` closes nothing.");
      open.pop();
    }
  }
  if (open.length) return at(open[open.length - 1], "This `(` is not closed.");
  const trimmed = text.trimEnd();
  const dangling = /(\+|-|\*|\/|=|<|>|,|\bAND|\bOR|\bNOT)$/i.exec(trimmed);
  if (dangling) return at(trimmed.length, "Something is missing after `" + dangling[1] + "`.");
  return "";
}

/** `{before, at, after}` of `text` around a located error, to underline it. */
export function markAt(text: string, message: string) {
  const at = locationIn(message);
  if (!at) return null;
  const lines = text.split("\n");
  const frame = lines[at.line - 1] ?? "";
  const start = Math.max(0, Math.min(frame.length, at.column - 1));
  const end = Math.min(frame.length, start + Math.max(1, (/^[^\s]+/.exec(frame.slice(start)) || [""])[0].length));
  return { before: frame.slice(0, start), at: frame.slice(start, end) || " ", after: frame.slice(end) };
}

/** A short description of what a field is. */
export function describe(f: any): string {
  switch (f.fieldKind) {
    case "formula":
      return "= " + f.formula;
    case "lookup":
      return "→ " + f.lookupTarget;
    case "rollup":
      return f.rollupFunction + "(" + (f.source || "") + (f.field ? "." + f.field : "") + ")" + (f.filter ? " where " + f.filter : "");
    default:
      return [f.required ? "required" : "", f.uniqueConstraint ? "unique" : "", f.indexed ? "indexed" : ""].filter(Boolean).join(", ");
  }
}

export async function plan(branch: string): Promise<Reply> {
  return api("POST", "/plan", { branch });
}

export async function apply(branch: string, allowDestructive: boolean): Promise<Reply> {
  return api("POST", "/apply", { branch, allowDestructive });
}

// ---------------------------------------------------------------------------------------------
// The diagram: one box per object (module by module, in rows), a solid arrow per lookup and a
// dashed one from each object to the object it extends.

const BOX_W = 230;
const HEAD_H = 28;
const ROW_H = 17;
const MAX_ROWS = 8;
const GAP_X = 70;
const GAP_Y = 50;

export function diagram(objects: any[], fields: any[]) {
  const columns = Math.max(1, Math.min(4, Math.ceil(Math.sqrt(objects.length))));
  const boxes: any[] = [];
  let rowTop = 20;
  let rowHeight = 0;
  objects.forEach((o, i) => {
    const col = i % columns;
    if (col === 0 && i > 0) {
      rowTop += rowHeight + GAP_Y;
      rowHeight = 0;
    }
    const own = fields.filter((f) => f.moduleKey === o.moduleKey && f.objectKey === o.objectKey);
    const shown = own.slice(0, MAX_ROWS).map((f, j) => ({ key: f.fieldKey, text: f.fieldKey + " : " + (f.fieldKind === "lookup" ? "→ " + f.lookupTarget : f.fieldType || f.fieldKind), y: HEAD_H + 14 + j * ROW_H }));
    if (own.length > MAX_ROWS) shown.push({ key: "$more", text: "+ " + (own.length - MAX_ROWS) + " more", y: HEAD_H + 14 + MAX_ROWS * ROW_H });
    const h = HEAD_H + 10 + Math.max(1, shown.length) * ROW_H;
    rowHeight = Math.max(rowHeight, h);
    boxes.push({
      key: o.moduleKey + "." + o.objectKey,
      label: o.label,
      abstract: !!o.isAbstract,
      x: 20 + col * (BOX_W + GAP_X),
      y: rowTop,
      w: BOX_W,
      h,
      rows: shown,
      href: "#/schema/",
    });
  });
  const at = (key: string) => boxes.find((b) => b.key === key);
  const edges: any[] = [];
  const link = (from: any, to: any, kind: string, label: string) => {
    if (!from || !to) return;
    edges.push({ key: kind + from.key + "→" + to.key + label, kind, d: curve(from, to), label });
  };
  for (const o of objects) if (o.extends) link(at(o.moduleKey + "." + o.objectKey), at(o.extends), "extends", "extends");
  for (const f of fields) if (f.fieldKind === "lookup") link(at(f.moduleKey + "." + f.objectKey), at(f.lookupTarget), "lookup", f.fieldKey);
  const width = columns * (BOX_W + GAP_X) - GAP_X + 40;
  const height = rowTop + rowHeight + 20;
  return { boxes, edges, width, height };
}

/** A curve from the side of `a` facing `b` to the side of `b` facing `a`. */
function curve(a: any, b: any): string {
  if (a === b) {
    const x = a.x + a.w;
    const y = a.y + HEAD_H / 2;
    return `M ${x} ${y} C ${x + 40} ${y - 30}, ${x + 40} ${y + 30}, ${x} ${y + 12}`;
  }
  const ax = a.x + a.w / 2;
  const bx = b.x + b.w / 2;
  if (Math.abs(ax - bx) < 1) {
    const down = b.y > a.y;
    const y1 = down ? a.y + a.h : a.y;
    const y2 = down ? b.y : b.y + b.h;
    const x = ax + 20;
    return `M ${x} ${y1} C ${x} ${(y1 + y2) / 2}, ${x} ${(y1 + y2) / 2}, ${x} ${y2}`;
  }
  const right = bx > ax;
  const x1 = right ? a.x + a.w : a.x;
  const x2 = right ? b.x : b.x + b.w;
  const y1 = a.y + HEAD_H / 2 + 4;
  const y2 = b.y + HEAD_H / 2 + 4;
  const mid = (x1 + x2) / 2;
  return `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`;
}
