// The System area: what `/status`, `/health`, `/branches` and the OpenAPI document say.
export { formatValue, plural } from "./lib.js";
import { api } from "./lib.js";

export async function loadSystem() {
  const [status, health, doc, branches] = await Promise.all([
    api("GET", "/status"),
    api("GET", "/health"),
    api("GET", "/openapi.json"),
    api("GET", "/branches"),
  ]);
  return {
    status: status.data,
    statusOk: status.ok,
    health: health.ok ? health.data.status : "unreachable",
    version: doc.ok && doc.data.info ? doc.data.info.version : "unknown",
    branches: branches.ok ? branches.data : [],
    branchError: branches.ok ? "" : branches.errors.map((e) => e.message).join(" "),
    checkedAt: new Date(),
  };
}

export function clock(when: Date): string {
  return new Intl.DateTimeFormat(undefined, { timeStyle: "medium" }).format(when);
}

export function short(commit: string | null | undefined): string {
  return commit ? commit.slice(0, 12) : "none";
}
