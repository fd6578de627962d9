// Logging in with a password, and choosing a password with a setup token (first run).
export { restoreSession } from "./lib.js";
import { api, startSession, messages, fieldErrors } from "./lib.js";

/** `POST /auth/login`; on success the session has started. */
export async function login(username: string, password: string) {
  const reply = await api("POST", "/auth/login", { username, password });
  if (!reply.ok) return { ok: false, message: messages(reply.errors).join(" ") || "Could not log in.", fields: fieldErrors(reply.errors) };
  const me = await startSession(reply.data);
  return me.ok ? { ok: true, message: "", fields: {} } : { ok: false, message: messages(me.errors).join(" "), fields: {} };
}

/** `POST /auth/set-password` with a one-time setup token; on success the session has started. */
export async function setPassword(setupToken: string, password: string) {
  const reply = await api("POST", "/auth/set-password", { setupToken, password });
  if (!reply.ok) return { ok: false, message: messages(reply.errors).join(" "), fields: fieldErrors(reply.errors) };
  const me = await startSession(reply.data);
  return me.ok ? { ok: true, message: "", fields: {} } : { ok: false, message: messages(me.errors).join(" "), fields: {} };
}
