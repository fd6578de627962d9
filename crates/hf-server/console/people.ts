// The People area: principals (administrators manage them), SSH credentials and one's own
// password.
export { formatTime, messages, fieldErrors, plural } from "./lib.js";
import { api, startSession } from "./lib.js";
import type { Reply } from "./lib.js";

export async function loadPrincipals(): Promise<Reply> {
  return api("GET", "/iam/principals");
}

export async function createPrincipal(name: string, isAdmin: boolean): Promise<Reply> {
  return api("POST", "/iam/principals", { name, isAdmin });
}

export async function setAdmin(id: string, isAdmin: boolean): Promise<Reply> {
  return api("PATCH", "/iam/principals/" + encodeURIComponent(id), { isAdmin });
}

export async function deletePrincipal(id: string): Promise<Reply> {
  return api("DELETE", "/iam/principals/" + encodeURIComponent(id));
}

export async function resetToken(id: string): Promise<Reply> {
  return api("POST", "/iam/principals/" + encodeURIComponent(id) + "/reset-token");
}

export async function loadCredentials(id: string): Promise<Reply> {
  return api("GET", "/iam/principals/" + encodeURIComponent(id) + "/credentials");
}

export async function addSshKey(id: string, publicKey: string): Promise<Reply> {
  return api("POST", "/iam/principals/" + encodeURIComponent(id) + "/credentials", { kind: "ssh", publicKey: publicKey.trim() });
}

export async function revokeCredential(id: string, credentialId: string): Promise<Reply> {
  return api("DELETE", "/iam/principals/" + encodeURIComponent(id) + "/credentials/" + encodeURIComponent(credentialId));
}

/**
 * Sets a new password with a setup token (`POST /auth/set-password`); an administrator gets one
 * for itself first (`POST /iam/principals/{id}/reset-token`). The answer's token becomes the
 * session's.
 */
export async function changePassword(selfId: string, isAdmin: boolean, setupToken: string, password: string): Promise<Reply> {
  let token = setupToken.trim();
  if (isAdmin) {
    const reset = await resetToken(selfId);
    if (!reset.ok) return reset;
    token = reset.data.setupToken;
  }
  const reply = await api("POST", "/auth/set-password", { setupToken: token, password });
  if (reply.ok) await startSession(reply.data);
  return reply;
}

/** Copies text to the clipboard where the browser allows it. */
export async function copy(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}
