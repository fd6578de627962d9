// The Screens area: every screen of the live branch, its HFX source compiled as you type
// (`POST /hfx/compile`, errors at their location), saving it, and a preview of the text being
// edited in the rendering frame (`POST /auth/session`, then `/auth/session/exchange?…#preview`
// in an iframe, which runs the compiled text the console sends it).
export { messages, fieldErrors, underline, plural } from "./lib.js";
import { api, liveBranch } from "./lib.js";
import type { Reply } from "./lib.js";

/** Every screen of every module of the live branch. */
export async function loadScreens() {
  const modules = await api("GET", "/metadata");
  if (!modules.ok) return { modules: [], screens: [], errors: modules.errors };
  const lists = await Promise.all(modules.data.map((m: any) => api("GET", "/metadata/" + encodeURIComponent(m.moduleKey) + "/screens")));
  const failed = lists.find((l) => !l.ok);
  if (failed) return { modules: modules.data, screens: [], errors: failed.errors };
  return { modules: modules.data, screens: lists.flatMap((l) => l.data), errors: [] };
}

/**
 * Compiles without storing: the diagnostics of a source, or none. The module's key makes the
 * screen's imports of vendored files compile to their addresses in the live branch, so the
 * preview can load them before the screen is saved.
 */
export async function check(source: string, sidecar: string, moduleKey: string): Promise<Reply> {
  const body: Record<string, string> = { source };
  if (sidecar.trim()) body.sidecar = sidecar;
  if (moduleKey) body.moduleKey = moduleKey;
  return api("POST", "/hfx/compile", body);
}

/** Writes a screen to the live branch (create or replace). */
export async function saveScreen(m: string, s: string, isNew: boolean, body: Record<string, unknown>): Promise<Reply> {
  const path = await livePath(m, s);
  return typeof path === "string" ? api(isNew ? "POST" : "PUT", path, body) : path;
}

export async function deleteScreen(m: string, s: string): Promise<Reply> {
  const path = await livePath(m, s);
  return typeof path === "string" ? api("DELETE", path) : path;
}

/** The write path of screen `s` of module `m` on the live branch, or why it is not known. */
async function livePath(m: string, s: string): Promise<string | Reply> {
  const live = await liveBranch();
  if (!("name" in live)) return live;
  return "/metadata@" + encodeURIComponent(live.name) + "/" + encodeURIComponent(m) + "/screens/" + encodeURIComponent(s);
}

/**
 * The URL of the rendering frame in preview mode (`#preview`: it runs the compiled text it is
 * sent, see `sendPreview`), with a fresh one-time session code, so the preview calls the API as
 * the console's principal.
 */
export async function previewUrl(m: string, s: string): Promise<{ url: string; error: string }> {
  const reply = await api("POST", "/auth/session");
  if (!reply.ok) return { url: "", error: reply.errors.map((e) => e.message).join(" ") };
  return { url: "/auth/session/exchange?code=" + encodeURIComponent(reply.data.code) + "&screen=" + encodeURIComponent(m + "/" + s) + "#preview", error: "" };
}

/** What the preview frame runs: the last text that compiled. */
export interface Compiled {
  js: string;
  sidecar: string | null;
}

/** Hands the compiled text to the preview frame (a window of this origin). */
export function sendPreview(frame: HTMLIFrameElement | null, compiled: Compiled | null): void {
  if (frame && frame.contentWindow && compiled) frame.contentWindow.postMessage({ hfxPreview: compiled }, location.origin);
}

/** Calls `ready` each time the preview frame `frame()` says it is ready for text; returns the way to stop. */
export function onPreviewReady(frame: () => HTMLIFrameElement | null, ready: () => void): () => void {
  const listen = (event: MessageEvent) => {
    const f = frame();
    if (event.origin === location.origin && f && event.source === f.contentWindow && event.data && event.data.hfxPreviewReady) ready();
  };
  window.addEventListener("message", listen);
  return () => window.removeEventListener("message", listen);
}

export const STARTER = `<script lang="ts">
  let count = 0;
</script>

<button on:click={() => count++}>Clicked {count} times</button>
`;

/** Debounces `fn`: it runs `ms` after the last call. */
export function debounce(fn: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null;
  return () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}
