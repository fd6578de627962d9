// The shell's logic: hash routes and the session. Everything shared lives in `lib`.
export * from "./lib.js";

/** The console's areas, in the order the navigation shows them. */
export const VIEWS = [
  { key: "schema", label: "Schema" },
  { key: "data", label: "Data" },
  { key: "query", label: "Query" },
  { key: "screens", label: "Screens" },
  { key: "people", label: "People" },
  { key: "system", label: "System" },
];

/** A parsed hash route: `#/data/crm/account` → `{view: "data", parts: ["crm", "account"]}`. */
export interface Route {
  view: string;
  parts: string[];
  key: string;
}

export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#\/?/, "");
  const [view, ...parts] = path.split("/").map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  const known = view === "login" || VIEWS.some((v) => v.key === view);
  return { view: known ? view : "", parts: known ? parts.filter((p) => p !== "") : [], key: path };
}

/** Where a logged-in user lands when the address names no area. */
export const HOME = "#/schema";
