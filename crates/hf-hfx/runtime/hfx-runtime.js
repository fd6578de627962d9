// hfx-runtime.js: the browser runtime that compiled HFX screens import.
//
// Served at /hfx/vendor/hfx-runtime.js. Hand-written, no dependencies. The compiler does the
// dependency analysis; this file only runs what it generated:
// - a component context holds the set of "dirty" state slots and flushes them in a microtask;
// - a block holds updaters, each tagged with the slots it depends on, and runs only those whose
//   slots are dirty (fine-grained updates, no virtual DOM);
// - text is always set through text nodes, attributes through setAttribute: never innerHTML;
// - if/each/query/form/child-component controllers own a range of nodes between two empty text
//   markers, so they can insert, move and remove their content.

const config = { token: null, baseUrl: "" };

/** Sets the bearer token (and optionally the API base URL) used by queries and forms. */
export function configure(options = {}) {
  if ("token" in options) config.token = options.token;
  if ("baseUrl" in options) config.baseUrl = options.baseUrl || "";
}

// ---------------------------------------------------------------------------------------------
// Reactivity

const MAX_FLUSH_ROUNDS = 100;

class Context {
  constructor(props) {
    this.props = props || {};
    this.setters = Object.create(null);
    // The last value of each bound prop (`bind:name` in the parent) known to both sides.
    this.shared = Object.create(null);
    this.dirty = new Set();
    this.deriveds = [];
    this.effects = [];
    this.root = new Block();
    // Blocks of this component's snippets rendered elsewhere (by a child component): they
    // depend on this component's state, so its flushes reach them.
    this.extra = new Set();
    this.live = false;
    this.scheduled = false;
  }
  /** Marks state slots dirty after an assignment; returns the assignment's value. */
  u(value, ...slots) {
    for (const s of slots) this.dirty.add(s);
    // Effects that keep changing what they depend on would loop forever; count the rounds.
    this.loops = this.inEffects ? (this.loops || 0) + 1 : 0;
    if (this.live && !this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
    return value;
  }
  /** Declares a prop: returns the caller's value, or `current` (the default) without one. */
  prop(name, current, slot, set, get) {
    if (set) this.setter(name, slot, set, get);
    const given = this.props[name];
    return given === undefined ? current : given;
  }
  /** Remembers how to change a prop (`set(value)`), read it, and which state slot it is. */
  setter(name, slot, set, get) {
    this.setters[name] = [slot, set, get];
    this.shared[name] = this.props[name];
  }
  /** `let { a, ...rest } = $props()`: `set` receives the props the pattern does not name. */
  rest(slot, set, named) {
    this.others = [slot, set, named, null];
    this.restUpdate(this.props);
  }
  restUpdate(props) {
    const o = this.others;
    const next = {};
    for (const k in props) if (!o[2].includes(k) && !k.startsWith("$$bind:")) next[k] = props[k];
    const prev = o[3];
    if (prev && Object.keys(prev).length === Object.keys(next).length && Object.keys(next).every((k) => prev[k] === next[k])) return;
    o[3] = next;
    o[1](next);
    if (prev) this.u(undefined, o[0]);
  }
  /** `export function` / `export const`: what a parent's `bind:this` gets. */
  expose(api) {
    this.api = api;
  }
  /** `$state(value)`: plain objects and arrays become deeply reactive (see `deep`). */
  deep(value, slot) {
    return deep(this, value, slot);
  }
  /** `$derived`: computes the value now, and again in each flush where `deps` changed. */
  derived(get, slot, deps, set) {
    const d = { get, slot, deps, set, value: get() };
    this.deriveds.push(d);
    return d.value;
  }
  /** `$effect(fn, deps)`: runs after mount, then after each flush where `deps` changed. */
  effect(fn, deps) {
    const e = { fn, deps, cleanup: null };
    this.effects.push(e);
    afterMount(this.root, () => runEffect(e));
  }
  flush() {
    this.scheduled = false;
    const changed = new Set();
    for (let round = 0; this.dirty.size > 0; round++) {
      if (round === MAX_FLUSH_ROUNDS) {
        console.error("hfx: updates keep changing state; stopped after " + MAX_FLUSH_ROUNDS + " rounds");
        this.dirty.clear();
        break;
      }
      const dirty = this.dirty;
      this.dirty = new Set();
      for (const d of this.deriveds) {
        if (!hit(dirty, d.deps)) continue;
        const v = d.get();
        if (v !== d.value) {
          d.value = v;
          d.set(v);
          dirty.add(d.slot);
        }
      }
      this.root.p(dirty);
      for (const blk of [...this.extra]) blk.p(dirty);
      for (const s of dirty) changed.add(s);
    }
    if (this.root.dead) return;
    // Bound props the component assigned itself go back to the parent.
    for (const name in this.setters) {
      const [slot, , get] = this.setters[name];
      const back = this.props["$$bind:" + name];
      if (back && get && changed.has(slot) && get() !== this.shared[name]) {
        this.shared[name] = get();
        back(this.shared[name]);
      }
    }
    if (this.loops > MAX_FLUSH_ROUNDS) {
      console.error("hfx: effects keep changing the state they read; stopped running them");
      return;
    }
    this.inEffects = true;
    try {
      for (const e of this.effects) if (hit(changed, e.deps)) runEffect(e);
    } finally {
      this.inEffects = false;
    }
  }
}

function runEffect(e) {
  if (e.cleanup) e.cleanup();
  const r = e.fn();
  e.cleanup = typeof r === "function" ? r : null;
}

// The component being set up: `onMount` and `onDestroy` register with it.
let current = null;
// Functions to run once what was just rendered is in the document: [block, fn] pairs.
let mountQueue = [];
let mountScheduled = false;

function afterMount(block, fn) {
  mountQueue.push([block, fn]);
  if (!mountScheduled) {
    mountScheduled = true;
    queueMicrotask(runMounts);
  }
}

function runMounts() {
  mountScheduled = false;
  const queue = mountQueue;
  mountQueue = [];
  for (const [block, fn] of queue) {
    if (block.dead) continue;
    const r = fn();
    if (typeof r === "function") block.cleanups.push(r);
  }
}

function setting(what) {
  if (!current) throw new Error("hfx: " + what + " is called while a component is set up (at the top level of its script)");
  return current;
}

/** Runs `fn` once the component is in the document; a function it returns runs on destroy. */
export function onMount(fn) {
  afterMount(setting("onMount").root, fn);
}

/** Runs `fn` when the component is destroyed. */
export function onDestroy(fn) {
  setting("onDestroy").root.cleanups.push(fn);
}

/** Resolves once the pending updates are in the DOM. */
export function tick() {
  return new Promise((resolve) => queueMicrotask(resolve));
}

// Deep state: a proxy per plain object or array, made once (so `a === a` holds), that marks its
// root's slot dirty on every write below it.
const RAW = Symbol("hfx.raw");
const proxies = new WeakMap();

function plain(v) {
  if (v === null || typeof v !== "object") return false;
  const proto = Object.getPrototypeOf(v);
  return Array.isArray(v) || proto === Object.prototype || proto === null;
}

function deep(ctx, value, slot) {
  if (!plain(value) || value[RAW]) return value;
  const known = proxies.get(value);
  if (known) return known;
  const proxy = new Proxy(value, {
    get(target, key, receiver) {
      if (key === RAW) return target;
      const v = Reflect.get(target, key, receiver);
      return plain(v) ? deep(ctx, v, slot) : v;
    },
    set(target, key, v, receiver) {
      const raw = v && v[RAW] ? v[RAW] : v;
      const before = target[key];
      const ok = Reflect.set(target, key, raw, receiver);
      if (before !== raw || key === "length") ctx.u(undefined, slot);
      return ok;
    },
    deleteProperty(target, key) {
      const ok = Reflect.deleteProperty(target, key);
      ctx.u(undefined, slot);
      return ok;
    },
  });
  proxies.set(value, proxy);
  return proxy;
}

function hit(dirty, deps) {
  if (deps === null) return true;
  for (let i = 0; i < deps.length; i++) if (dirty.has(deps[i])) return true;
  return false;
}

/** A group of updaters that live and die together (a component, a branch, a list item). */
class Block {
  constructor() {
    this.ups = [];
    this.cleanups = [];
  }
  /** Runs `fn` now and again whenever one of `deps` is dirty (`null`: on every flush). */
  u(deps, fn) {
    fn(undefined);
    if (deps === null || deps.length > 0) this.ups.push(deps, fn);
  }
  p(dirty) {
    for (let i = 0; i < this.ups.length; i += 2) {
      if (hit(dirty, this.ups[i])) this.ups[i + 1](dirty);
    }
  }
  /** Runs every cleanup registered below this block (nested blocks register theirs here). */
  destroy() {
    this.dead = true;
    const cleanups = this.cleanups;
    this.cleanups = [];
    this.ups = [];
    for (const c of cleanups) c();
  }
}

// ---------------------------------------------------------------------------------------------
// Components

/** Wraps a compiled setup function as a component (the default export of a compiled screen). */
export function component(setup, scope, css) {
  return { hfx: 1, setup, scope, css };
}

const injected = new Set();

// Constructed stylesheets, where the browser has them: a strict Content-Security-Policy
// (`style-src` without 'unsafe-inline', as in the rendering frame) blocks <style> elements made by
// script, but not stylesheets built through the CSSOM.
function injectCss(scope, css) {
  if (!css || injected.has(scope)) return;
  injected.add(scope);
  if (typeof CSSStyleSheet === "function" && "adoptedStyleSheets" in document) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    return;
  }
  const style = document.createElement("style");
  style.setAttribute("data-hfx", scope);
  style.textContent = css;
  document.head.appendChild(style);
}

function instantiate(C, props, parent, anchor) {
  if (!C || C.hfx !== 1) throw new TypeError("hfx: not a compiled HFX component");
  injectCss(C.scope, C.css);
  const ctx = new Context(props);
  const block = ctx.root;
  const outer = current;
  current = ctx;
  let render;
  try {
    render = C.setup(ctx, ctx.props);
  } finally {
    current = outer;
  }
  block.cleanups.push(() => {
    for (const e of ctx.effects) if (e.cleanup) e.cleanup();
  });
  const frag = document.createDocumentFragment();
  const start = text(frag, "");
  render(block, frag);
  const end = text(frag, "");
  ctx.dirty.clear();
  ctx.live = true;
  parent.insertBefore(frag, anchor || null);
  return {
    api: ctx.api || {},
    // `whole`: `next` is every prop (a parent component's), not only those that changed.
    set(next, whole) {
      for (const name of Object.keys(next || {})) {
        const entry = ctx.setters[name];
        if (entry) {
          ctx.shared[name] = next[name];
          entry[1](next[name]);
          ctx.u(undefined, entry[0]);
        } else if (name.startsWith("$$bind:")) {
          ctx.props[name] = next[name];
        }
      }
      if (ctx.others) {
        ctx.props = whole ? { ...next } : { ...ctx.props, ...next };
        ctx.restUpdate(ctx.props);
      }
    },
    destroy() {
      block.destroy();
      clear(start, end);
      start.remove();
      end.remove();
    },
  };
}

/** Mounts a component into `target`; returns `{ set(props), destroy() }`. */
export function mount(C, target, props) {
  const app = instantiate(C, props || {}, target, null);
  runMounts();
  return app;
}

/** Where the rendering frame is served again (with the session cookie) after a reload. */
const FRAME_PATH = "/hfx/modules/frame";
const SCREEN = /^[a-z][a-z0-9_]*\/[a-z][a-z0-9_]*$/;

/**
 * Boots the rendering frame (the page `GET /auth/session/exchange` serves): uses the session token
 * for the API and shows the screen the URL's hash names (`#module/screen?name=value`, the values
 * are the screen's props), or else `session.screen`. The address becomes
 * `/hfx/modules/frame#module/screen…`, which the server answers again on a reload while the
 * session cookie is valid; `navigate` (or the Back button) changes the screen. Afterwards
 * `target` carries `data-hfx-state="mounted"`, or `"failed"` with the reason shown as text.
 */
export async function boot(session, target) {
  configure({ token: (session && session.token) || null });
  const hash = location.hash || (session && session.screen ? "#" + session.screen : "");
  if (!hash) return null;
  // Also takes the one-time code out of the address bar and the history.
  if (location.pathname !== FRAME_PATH || location.hash !== hash) history.replaceState(null, "", FRAME_PATH + hash);
  if (hash === PREVIEW) return previewFrame(target);
  window.addEventListener("hashchange", () => show(target));
  return show(target);
}

// `#preview`: the frame runs compiled text its parent sends (the console's preview of a screen
// being edited, `POST /hfx/compile`'s `compiledJs` and `compiledSidecar`) instead of a stored
// screen. Only a parent of the same origin is listened to; such a page can script the frame
// anyway, so this gives it nothing new. The text becomes `blob:` modules, which the frame's
// policy lets the runtime import (its imports carry the page script's nonce); their imports are
// made absolute first, because nothing resolves against a `blob:` address.
const PREVIEW = "#preview";

function previewFrame(target) {
  window.addEventListener("message", (event) => {
    const sent = event.data && event.data.hfxPreview;
    if (event.origin === location.origin && event.source === window.parent && sent) previewText(target, sent);
  });
  window.parent.postMessage({ hfxPreviewReady: true }, location.origin);
  return null;
}

function previewText(target, sent) {
  const urls = [];
  const blob = (code) => {
    const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
    urls.push(url);
    return url;
  };
  const url = blob(absoluteImports(sent.js, sent.sidecar ? blob(absoluteImports(sent.sidecar)) : null));
  return present(target, "preview", {}, () => import(url)).finally(() => urls.forEach((u) => URL.revokeObjectURL(u)));
}

// The import and export-from lines the compiler prints (one a line, the specifier in double
// quotes): `/…` becomes an address of this origin and `./sidecar` the sidecar's `blob:` address.
const IMPORT_LINE = /^(\s*(?:import|export)\b[^"]*?\bfrom\s*|\s*import\s*)"([^"]+)";$/;

function absoluteImports(code, sidecar) {
  return code
    .split("\n")
    .map((line) => {
      const m = IMPORT_LINE.exec(line);
      if (!m) return line;
      const spec = m[2] === "./sidecar" && sidecar ? sidecar : m[2].startsWith("/") ? location.origin + m[2] : m[2];
      return m[1] + JSON.stringify(spec) + ";";
    })
    .join("\n");
}

let shown = null;

async function show(target) {
  const route = location.hash.slice(1);
  const at = route.indexOf("?");
  const screen = decodeURIComponent(at < 0 ? route : route.slice(0, at));
  const props = Object.fromEntries(new URLSearchParams(at < 0 ? "" : route.slice(at + 1)));
  return present(target, screen, props, async () => {
    if (!SCREEN.test(screen)) throw new Error("not a screen name (module/screen)");
    const [moduleKey, screenKey] = screen.split("/");
    return import((await request("GET", "/hfx/resolve/" + moduleKey + "/" + screenKey)).moduleUrl);
  });
}

/** Replaces what the frame shows with the component of the module `load()` imports. */
async function present(target, screen, props, load) {
  if (shown) shown.destroy();
  shown = null;
  while (target.firstChild) target.firstChild.remove();
  try {
    shown = mount((await load()).default, target, props);
    target.setAttribute("data-hfx-state", "mounted");
    target.setAttribute("data-hfx-screen", screen);
    return shown;
  } catch (error) {
    const box = el(target, "p");
    box.setAttribute("class", "hfx-boot-error");
    box.setAttribute("role", "alert");
    text(box, "The screen " + screen + " could not be loaded: " + String((error && error.message) || error));
    target.setAttribute("data-hfx-state", "failed");
    console.error("hfx: could not load the screen " + screen, error);
    return null;
  }
}

/** Opens another screen in the rendering frame: `navigate("crm/account_edit", { id })`. */
export function navigate(screen, params) {
  const query = new URLSearchParams(params || {}).toString();
  location.hash = screen + (query ? "?" + query : "");
}

/** Loads another screen of the same snapshot (`import X from "screen:m/s"`). */
export async function screen(base, moduleKey, screenKey) {
  // A preview's module (a `blob:` address) has no siblings: the stored screen is resolved.
  const url = base.startsWith("blob:") ? (await request("GET", "/hfx/resolve/" + moduleKey + "/" + screenKey)).moduleUrl : screenUrl(base, moduleKey, screenKey);
  const mod = await import(url);
  return mod.default;
}

/** The URL of a sibling screen module: same directory and commit prefix as `base`. */
export function screenUrl(base, moduleKey, screenKey) {
  const url = new URL(base);
  const file = url.pathname.slice(url.pathname.lastIndexOf("/") + 1);
  const dash = file.indexOf("-");
  const commit = dash > 0 ? file.slice(0, dash) + "-" : "";
  return new URL(commit + moduleKey + "-" + screenKey + ".js", url).href;
}

/**
 * `<Child a={x} />`: mounts a child component and passes it new props when they change;
 * `bindThis` (`bind:this`) gets the instance's API, and null once it is destroyed.
 */
export function child(b, parent, C, props, deps, bindThis) {
  const end = text(parent, "");
  let inst = null;
  b.u(deps, () => {
    const p = props();
    if (inst) inst.set(p, true);
    else {
      inst = instantiate(C, p, end.parentNode, end);
      if (bindThis) bindThis(inst.api);
    }
  });
  b.cleanups.push(() => {
    if (!inst) return;
    inst.destroy();
    if (bindThis) bindThis(null);
  });
}

// ---------------------------------------------------------------------------------------------
// Snippets

/** What calling a snippet gives: the snippet and its arguments, for `{@render}`. */
class Rendered {
  constructor(snip, args) {
    this.snip = snip;
    this.args = args;
  }
}

/**
 * `{#snippet name(params)}`: a function of the arguments whose call `{@render}` shows. `slot` is
 * the owner's slot that stands for the arguments: updaters reading a parameter depend on it.
 */
export function snippet(ctx, slot, body) {
  const snip = { ctx, slot, body };
  return (...args) => new Rendered(snip, args);
}

/** `{@render name(args)}`: shows the snippet; new arguments update it in place. */
export function render(b, parent, get, deps) {
  const end = text(parent, "");
  let snip = null;
  let blk = null;
  let start = null;
  function drop() {
    if (!blk) return;
    snip.ctx.extra.delete(blk);
    blk.destroy();
    clear(start, end);
    start.remove();
    blk = snip = start = null;
  }
  b.u(deps, () => {
    const r = get();
    if (r != null && !(r instanceof Rendered)) throw new TypeError("hfx: {@render} needs a snippet call, like {@render children()}");
    if (blk && r && r.snip === snip) {
      if (blk.set) blk.set(r.args);
      blk.p(new Set([snip.slot]));
      return;
    }
    drop();
    if (!r) return;
    snip = r.snip;
    blk = new Block();
    const frag = document.createDocumentFragment();
    start = text(frag, "");
    snip.body(blk, frag, r.args);
    snip.ctx.extra.add(blk);
    end.parentNode.insertBefore(frag, end);
  });
  b.cleanups.push(drop);
}

// ---------------------------------------------------------------------------------------------
// DOM helpers

const SVG_NS = "http://www.w3.org/2000/svg";

export function el(parent, tag, svg) {
  const e = svg ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  parent.appendChild(e);
  return e;
}

export function text(parent, data) {
  const t = document.createTextNode(data);
  parent.appendChild(t);
  return t;
}

/** Text content of a value: `null`/`undefined` render as nothing. */
export function str(v) {
  return v == null ? "" : String(v);
}

export function set_text(node, v) {
  const s = str(v);
  if (node.data !== s) node.data = s;
}

const URL_ATTRS = new Set(["href", "src", "action", "formaction", "xlink:href", "poster"]);
const UNSAFE_URL = /^\s*(javascript|vbscript):/i;

/** Sets an attribute: `null`, `undefined` and `false` remove it, `true` sets it empty. */
export function attr(e, name, v) {
  if (v == null || v === false) {
    e.removeAttribute(name);
    return;
  }
  let s = v === true ? "" : String(v);
  if (URL_ATTRS.has(name) && UNSAFE_URL.test(s)) s = "unsafe:" + s;
  if (e.getAttribute(name) === s) return;
  // Through the CSSOM: a strict CSP refuses `style` attributes set with setAttribute.
  if (name === "style" && e.style) e.style.cssText = s;
  else e.setAttribute(name, s);
}

/** Sets a DOM property; a dynamic `value` is also kept with its type (see `valueOf`). */
export function prop(e, name, v) {
  if (name === "value") {
    e.__value = v;
    if (e.value !== str(v)) e.value = str(v);
  } else if (e[name] !== v) e[name] = v;
}

/** An option's or input's value with its type: `<option value={25}>` gives 25, not "25". */
function valueOf(e) {
  return "__value" in e ? e.__value : e.value;
}

function same(a, b) {
  return a === b || (a != null && b != null && String(a) === String(b));
}

/**
 * A number input's text as state: a number, or the text itself when a number would lose digits
 * (`99999999999999999999.5`, a decimal field's value), or null when empty.
 */
function numberOf(text) {
  if (text === "") return null;
  const n = Number(text);
  if (!Number.isFinite(n)) return text;
  if (/e/i.test(text)) return n;
  let t = text.trim().replace(/^[+-]/, "");
  if (t.includes(".")) t = t.replace(/0+$/, "").replace(/\.$/, "");
  t = t.replace(/^0+(?=\d)/, "").replace(/^\./, "0.");
  return String(Math.abs(n)) === (t || "0") ? n : text;
}

/** The `class` attribute of a scoped screen: the author's classes plus the scope class. */
export function cls(v, scope) {
  const s = v == null || v === false ? "" : String(v);
  return s ? s + " " + scope : scope;
}

/** `use:action={param}`: `action(e, param)` once `e` is in the document, `update`, `destroy`. */
export function action(ctx, b, e, fn, param, deps) {
  let handle = null;
  let started = false;
  afterMount(b, () => {
    started = true;
    handle = fn(e, param()) || null;
  });
  b.u(deps, () => {
    if (started && handle && handle.update) handle.update(param());
  });
  b.cleanups.push(() => {
    if (handle && handle.destroy) handle.destroy();
  });
}

/**
 * `{...object}` on an element: its entries as attributes (functions and `on*` keys skipped). A
 * scoped screen's elements keep the scope class (`ownClass`: a `class` attribute sets it).
 */
export function spread(b, e, get, deps, scope, ownClass) {
  let prev = [];
  b.u(deps, () => {
    const values = get() || {};
    const keys = Object.keys(values).filter((k) => typeof values[k] !== "function" && !/^on/i.test(k));
    for (const k of prev) if (!keys.includes(k)) attr(e, k, null);
    for (const k of keys) {
      if (k === "value" || k === "checked") prop(e, k, values[k]);
      else attr(e, k, k === "class" && scope ? cls(values[k], scope) : values[k]);
    }
    if (scope && !ownClass && !keys.includes("class")) attr(e, "class", scope);
    prev = keys;
  });
}

export function toggle_class(e, name, on) {
  e.classList.toggle(name, !!on);
}

export function style(e, name, v) {
  if (v == null || v === false) e.style.removeProperty(name);
  else e.style.setProperty(name, String(v));
}

/** `on:event={handler}`: the handler expression is read at event time, so it may change. */
export function on(e, type, get, modifiers) {
  const mods = modifiers ? modifiers.split("|") : [];
  const options = { capture: mods.includes("capture"), once: mods.includes("once"), passive: mods.includes("passive") };
  e.addEventListener(
    type,
    function (event) {
      if (mods.includes("self") && event.target !== e) return;
      if (mods.includes("preventDefault")) event.preventDefault();
      if (mods.includes("stopPropagation")) event.stopPropagation();
      const handler = get();
      if (typeof handler === "function") return handler.call(this, event);
    },
    options,
  );
}

function numeric(e) {
  return e.type === "number" || e.type === "range";
}

/**
 * `bind:value`: state to `value`, and `input`/`change` events back to state. A select gives its
 * options' typed values (an array for `<select multiple>`); a number input gives numbers, or the
 * text when a number would lose digits.
 */
export function bind_value(b, e, get, set, deps) {
  if (e.tagName === "SELECT") {
    // On every update: the options may change (an {#each} of them) while the value stays.
    b.u(null, () => {
      const v = get();
      const options = [...e.options];
      if (e.multiple) for (const o of options) o.selected = Array.isArray(v) && v.some((x) => same(x, valueOf(o)));
      else e.selectedIndex = options.findIndex((o) => same(v, valueOf(o)));
    });
    e.addEventListener("change", () => {
      const chosen = [...e.selectedOptions].map(valueOf);
      set(e.multiple ? chosen : chosen[0]);
    });
    return;
  }
  b.u(deps, () => {
    const v = get();
    if (numeric(e) && typeof v !== "string") {
      if (e.valueAsNumber !== v && !(v == null && e.value === "")) e.value = v == null ? "" : String(v);
    } else if (e.value !== str(v)) {
      e.value = str(v);
    }
  });
  e.addEventListener("input", () => set(numeric(e) ? numberOf(e.value) : e.value));
}

/** `bind:group`: radios give the checked one's value, checkboxes the array of checked values. */
export function bind_group(b, e, get, set, deps) {
  const radio = e.type === "radio";
  b.u(deps, () => {
    const g = get();
    e.checked = radio ? same(g, valueOf(e)) : Array.isArray(g) && g.some((x) => same(x, valueOf(e)));
  });
  e.addEventListener("change", () => {
    const v = valueOf(e);
    if (radio) return e.checked && set(v);
    const g = Array.isArray(get()) ? get() : [];
    const without = g.filter((x) => !same(x, v));
    set(e.checked ? [...without, v] : without);
  });
}

/** `bind:checked`: state to `checked`, and `change` events back to state. */
export function bind_checked(b, e, get, set, deps) {
  b.u(deps, () => {
    const v = !!get();
    if (e.checked !== v) e.checked = v;
  });
  e.addEventListener("change", () => set(e.checked));
}

function clear(start, end) {
  let n = start.nextSibling;
  while (n && n !== end) {
    const next = n.nextSibling;
    n.remove();
    n = next;
  }
}

function moveRange(start, end, parent, before) {
  let n = start;
  for (;;) {
    const next = n.nextSibling;
    parent.insertBefore(n, before);
    if (n === end) break;
    n = next;
  }
}

// ---------------------------------------------------------------------------------------------
// Blocks

/** `{#if}`: `select()` returns the branch index to show, or -1 for none. */
export function if_block(b, parent, select, deps, branches) {
  const start = text(parent, "");
  const end = text(parent, "");
  let index = -1;
  let blk = null;
  b.u(null, (dirty) => {
    const i = dirty === undefined || hit(dirty, deps) ? select() : index;
    if (i === index) {
      if (blk && dirty !== undefined) blk.p(dirty);
      return;
    }
    if (blk) blk.destroy();
    clear(start, end);
    index = i;
    blk = null;
    if (i >= 0 && branches[i]) {
      blk = new Block();
      const frag = document.createDocumentFragment();
      branches[i](blk, frag);
      end.parentNode.insertBefore(frag, end);
    }
  });
  b.cleanups.push(() => blk && blk.destroy());
}

/** Shows one branch between two markers: a fresh block for `branch`, or nothing. */
function region(parent) {
  const start = text(parent, "");
  const end = text(parent, "");
  const r = {
    blk: null,
    show(branch, value) {
      r.drop();
      if (!branch) return;
      r.blk = new Block();
      const frag = document.createDocumentFragment();
      branch(r.blk, frag, value);
      end.parentNode.insertBefore(frag, end);
    },
    drop() {
      if (r.blk) r.blk.destroy();
      r.blk = null;
      clear(start, end);
    },
  };
  return r;
}

/** `{#await}`: `pending` while the promise runs, then `then(value)` or `caught(error)`. */
export function await_block(b, parent, get, deps, pending, then, caught) {
  const r = region(parent);
  let token = 0;
  b.u(null, (dirty) => {
    if (dirty !== undefined && !hit(dirty, deps)) {
      if (r.blk) r.blk.p(dirty);
      return;
    }
    const p = get();
    const mine = ++token;
    if (!p || typeof p.then !== "function") return r.show(then, p);
    r.show(pending);
    p.then(
      (v) => mine === token && r.show(then, v),
      (e) => {
        if (mine !== token) return;
        r.show(caught, e);
        if (!caught) console.error("hfx: {#await} without {:catch}:", e);
      },
    );
  });
  b.cleanups.push(() => {
    token++;
    r.drop();
  });
}

/** `{#key value}`: the content is made anew whenever `value` changes. */
export function key_block(b, parent, get, deps, body) {
  const r = region(parent);
  let value;
  b.u(null, (dirty) => {
    if (dirty !== undefined && !hit(dirty, deps)) {
      if (r.blk) r.blk.p(dirty);
      return;
    }
    const v = get();
    if (r.blk && v === value) return r.blk.p(dirty);
    value = v;
    r.show(body);
  });
  b.cleanups.push(() => r.drop());
}

/** Positions of a longest strictly increasing subsequence of `seq` (entries < 0 never count). */
function longestIncreasing(seq) {
  const tails = []; // tails[l]: position of the smallest end of an increasing run of length l+1
  const prev = new Array(seq.length);
  for (let i = 0; i < seq.length; i++) {
    if (seq[i] < 0) continue;
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (seq[tails[mid]] < seq[i]) lo = mid + 1;
      else hi = mid;
    }
    prev[i] = lo > 0 ? tails[lo - 1] : -1;
    tails[lo] = i;
  }
  const stay = new Set();
  for (let i = tails.length ? tails[tails.length - 1] : -1; i >= 0; i = prev[i]) stay.add(i);
  return stay;
}

/** `{#each}`: keyed (or by index) list of item blocks, reused, moved and removed by key. */
export function each(b, parent, list, deps, key, item, otherwise) {
  const end = text(parent, "");
  let items = new Map(); // key -> { blk, start, end }
  let order = [];
  let elseBlk = null;
  let elseStart = null;

  function renderElse() {
    if (elseBlk || !otherwise) return;
    elseBlk = new Block();
    const frag = document.createDocumentFragment();
    elseStart = text(frag, "");
    otherwise(elseBlk, frag);
    end.parentNode.insertBefore(frag, end);
  }
  function dropElse() {
    if (!elseBlk) return;
    elseBlk.destroy();
    clear(elseStart, end);
    elseStart.remove();
    elseBlk = null;
    elseStart = null;
  }

  b.u(null, (dirty) => {
    if (dirty !== undefined && !hit(dirty, deps)) {
      for (const k of order) items.get(k).blk.p(dirty);
      if (elseBlk) elseBlk.p(dirty);
      return;
    }
    const values = Array.from(list() || []);
    const next = new Map();
    const nextOrder = [];
    values.forEach((v, i) => {
      let k = key ? key(v, i) : i;
      if (next.has(k)) {
        console.error("hfx: duplicate key in {#each}:", k);
        k = { duplicate: k, i };
      }
      let entry = items.get(k);
      if (entry) {
        items.delete(k);
        entry.blk.set(v, i);
        if (dirty !== undefined) entry.blk.p(dirty);
      } else {
        const blk = new Block();
        const frag = document.createDocumentFragment();
        const s = text(frag, "");
        item(blk, frag, v, i);
        const e = text(frag, "");
        entry = { blk, start: s, end: e, frag };
      }
      next.set(k, entry);
      nextOrder.push(k);
    });
    for (const entry of items.values()) {
      entry.blk.destroy();
      clear(entry.start, entry.end);
      entry.start.remove();
      entry.end.remove();
    }
    // Place items in order, walking backwards from the end marker. Rows on the longest run that
    // kept its relative order stay where they are; only the others move.
    const host = end.parentNode;
    let before = end;
    if (values.length === 0) renderElse();
    else dropElse();
    if (elseStart) before = elseStart;
    const was = new Map(order.map((k, i) => [k, i]));
    const stay = longestIncreasing(nextOrder.map((k) => (next.get(k).frag ? -1 : was.get(k))));
    for (let i = nextOrder.length - 1; i >= 0; i--) {
      const entry = next.get(nextOrder[i]);
      if (entry.frag) {
        host.insertBefore(entry.frag, before);
        entry.frag = null;
      } else if (!stay.has(i) && entry.end.nextSibling !== before) {
        moveRange(entry.start, entry.end, host, before);
      }
      before = entry.start;
    }
    items = next;
    order = nextOrder;
  });
  b.cleanups.push(() => {
    for (const entry of items.values()) entry.blk.destroy();
    if (elseBlk) elseBlk.destroy();
  });
}

// ---------------------------------------------------------------------------------------------
// Data: /data/query and record writes

/** An error response of the hf server: `errors` is the envelope's list. */
export class HfxError extends Error {
  constructor(status, errors) {
    super(errors && errors[0] ? errors[0].message : "HTTP " + status);
    this.status = status;
    this.errors = errors || [];
  }
}

/** Calls the hf API with the configured bearer token; resolves to the JSON body. */
export async function request(method, path, body, signal) {
  return (await send(method, path, body, signal)).data;
}

/**
 * `request`, also giving the response's `ETag` (a record's version) and sending `ifMatch` and a
 * create's `idempotencyKey`.
 */
async function send(method, path, body, signal, ifMatch, idempotencyKey) {
  const headers = { accept: "application/json" };
  if (ifMatch) headers["if-match"] = ifMatch;
  if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
  if (body !== undefined) headers["content-type"] = "application/json";
  if (config.token) headers.authorization = "Bearer " + config.token;
  let res;
  try {
    res = await fetch(config.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (e && e.name === "AbortError") throw e;
    throw new HfxError(0, [{ code: "NETWORK_ERROR", message: String((e && e.message) || e), scope: "request", target: null }]);
  }
  let data = null;
  if (res.status !== 204) {
    try {
      data = await res.json();
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const errors = data && Array.isArray(data.errors) ? data.errors : [{ code: "HTTP_" + res.status, message: res.statusText || "HTTP " + res.status, scope: "request", target: null }];
    throw new HfxError(res.status, errors);
  }
  return { data, etag: res.headers.get("etag") };
}

function errorsOf(e) {
  if (e instanceof HfxError) return e.errors;
  return [{ code: "CLIENT_ERROR", message: String((e && e.message) || e), scope: "request", target: null }];
}

/** Runs a HOQS query once: resolves to the records. */
export async function runQuery(hoqs, params, signal) {
  const data = await request("POST", "/data/query", { query: hoqs, params: params || {} }, signal);
  return (data && data.records) || [];
}

/**
 * `{#query "HOQS", params, options as q}`: runs the query now and whenever its text or parameter
 * values change, and exposes `q.loading`, `q.error`, `q.errors`, `q.records`, `q.total` (with the
 * `count` option) and `q.refresh()` to the block's markup. With `paged: true` it reads the query a
 * page at a time through the API's keyset cursor (`cursor`/`nextCursor`): `q.hasMore`,
 * `q.loadMore()` (append the next page), `q.next()`, `q.previous()` (show another page instead),
 * `q.page` and `q.hasPrevious`.
 */
export function query(ctx, b, parent, slot, get, deps, body) {
  let controller = null;
  let seq = 0;
  let last = null; // the text, parameters and options of the last run, as JSON
  let timer = null;
  let shown = null; // [hoqs, params, options] of the records on show
  let cursors = [null]; // paged: the cursor each page on show was read with, first page first
  let after = null; // paged: the cursor of the page after the last one read
  const q = {
    loading: false,
    error: null,
    errors: [],
    records: [],
    total: null,
    page: 1,
    hasMore: false,
    hasPrevious: false,
    refresh() {
      return run(true);
    },
    loadMore() {
      return after ? exec(shown, after, "more") : Promise.resolve();
    },
    next() {
      return after ? exec(shown, after, "next") : Promise.resolve();
    },
    previous() {
      return cursors.length > 1 ? exec(shown, cursors[cursors.length - 2], "previous") : Promise.resolve();
    },
  };
  // Runs when the query's text, parameter values or options changed (or on `refresh()`); with
  // `debounce: ms`, a change waits until nothing changed for that long.
  function run(force) {
    const [hoqs, params, options] = get();
    const what = [hoqs, params, options || {}];
    const key = JSON.stringify(what);
    if (!force && key === last) return;
    const first = last === null;
    last = key;
    clearTimeout(timer);
    if (force || first || !(what[2].debounce > 0)) return exec(what, null, "first");
    timer = setTimeout(() => exec(what, null, "first"), what[2].debounce);
  }
  // `how`: "first" (the query anew), "more" (append the page at `cursor`), "next" or "previous"
  // (show the page at `cursor` instead).
  async function exec(what, cursor, how) {
    const [hoqs, params, opts] = what;
    if (controller) controller.abort();
    const mine = ++seq;
    controller = new AbortController();
    q.loading = true;
    ctx.u(undefined, slot);
    try {
      const sent = { query: hoqs, params: params || {} };
      if (opts.paged) sent.cursor = cursor;
      const [data, counted] = await Promise.all([
        request("POST", "/data/query", sent, controller.signal),
        opts.count && how === "first" ? runQuery(opts.count, params, controller.signal) : null,
      ]);
      if (mine !== seq) return;
      const records = (data && data.records) || [];
      shown = what;
      after = (opts.paged && data && data.nextCursor) || null;
      if (how === "first") {
        cursors = [null];
        q.total = counted && counted[0] ? Object.values(counted[0])[0] : null;
      } else if (how === "previous") cursors.pop();
      else cursors.push(cursor);
      q.records = how === "more" ? [...q.records, ...records] : records;
      q.page = cursors.length;
      q.hasMore = after !== null;
      q.hasPrevious = how !== "more" && cursors.length > 1;
      q.errors = [];
      q.error = null;
    } catch (e) {
      if (mine !== seq || (e && e.name === "AbortError")) return;
      q.errors = errorsOf(e);
      q.error = q.errors[0] || null;
    }
    q.loading = false;
    ctx.u(undefined, slot);
  }
  body(b, parent, q);
  b.u(deps, () => {
    run(false);
  });
  b.cleanups.push(() => {
    seq++;
    clearTimeout(timer);
    if (controller) controller.abort();
  });
}

const SYSTEM_FIELDS = new Set(["id", "createdAt", "updatedAt"]);

/**
 * The `Idempotency-Key` of a create that is not known to have been made: `keyFor(sent)` gives
 * the same key while the same create (`sent`, its text) is sent again, so the server answers a
 * repeat after a lost answer with the record the first made; another create gets a new key.
 * `made()` forgets it once the create's answer arrived.
 */
export function createKeys() {
  let pending = null;
  return {
    keyFor(sent) {
      if (!pending || pending.sent !== sent) {
        // 128 random bits in hex (`crypto.randomUUID` needs HTTPS).
        const bytes = new Uint8Array(16);
        crypto.getRandomValues(bytes);
        pending = { sent, key: Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("") };
      }
      return pending.key;
    },
    made() {
      pending = null;
    },
  };
}

/**
 * `{#form module.object[, id] as f}`: a `<form>` bound to one record. Without an id it creates
 * (`POST /data/m/o`, with an `Idempotency-Key` kept until the create is known to be made), with
 * one it loads and edits (`GET`, then `PATCH` of the changed fields).
 * Field-scoped errors go to `f.errors[field]`, the rest to `f.recordErrors`, shown above the form.
 */
export function form(ctx, b, parent, slot, moduleKey, objectKey, getId, deps, scope, getOptions, body) {
  const e = el(parent, "form");
  e.setAttribute("novalidate", "");
  const attributes = (getOptions() || {}).attributes || {};
  for (const k of Object.keys(attributes)) if (k !== "class") attr(e, k, attributes[k]);
  e.setAttribute("class", ["hfx-form", attributes.class, scope].filter(Boolean).join(" "));
  const list = el(e, "ul");
  list.setAttribute("class", scope ? "hfx-form-errors " + scope : "hfx-form-errors");
  list.setAttribute("role", "alert");
  const base = "/data/" + encodeURIComponent(moduleKey) + "/" + encodeURIComponent(objectKey);
  let loaded = {};
  let version = null; // the ETag of the loaded record, sent as If-Match
  // Saving the same values again after a lost answer sends the same key (see `createKeys`).
  const createKey = createKeys();
  let seq = 0;
  const url = () => base + "/" + encodeURIComponent(f.id);
  const f = {
    id: null,
    errors: {},
    recordErrors: [],
    conflict: false,
    loading: false,
    saving: false,
    record: null,
    async save() {
      f.errors = {};
      f.recordErrors = [];
      f.conflict = false;
      // `validate(values)` may refuse before anything is sent: field key → message, or a
      // message for the whole record.
      const validate = (getOptions() || {}).validate;
      const problems = validate ? validate(f.values) : null;
      if (typeof problems === "string" && problems) f.recordErrors = [problems];
      else if (problems && typeof problems === "object") for (const k of Object.keys(problems)) if (problems[k]) f.errors[k] = String(problems[k]);
      if (f.recordErrors.length || Object.keys(f.errors).length) {
        ctx.u(undefined, slot);
        return null;
      }
      f.saving = true;
      ctx.u(undefined, slot);
      try {
        let record;
        if (f.id == null) {
          const body = {};
          for (const [k, v] of Object.entries(f.values)) if (v !== undefined && !SYSTEM_FIELDS.has(k)) body[k] = v;
          const key = createKey.keyFor(JSON.stringify(body));
          record = (await send("POST", base, body, undefined, undefined, key)).data;
          createKey.made();
          f.values = {};
        } else {
          const body = {};
          for (const [k, v] of Object.entries(f.values)) {
            if (!SYSTEM_FIELDS.has(k) && JSON.stringify(v) !== JSON.stringify(loaded[k])) body[k] = v;
          }
          const res = await send("PATCH", url(), body, undefined, version);
          record = res.data;
          version = res.etag;
          loaded = { ...record };
          f.values = { ...record };
        }
        f.record = record;
        f.saving = false;
        ctx.u(undefined, slot);
        e.dispatchEvent(new CustomEvent("saved", { detail: record, bubbles: true }));
        return record;
      } catch (err) {
        const errors = errorsOf(err);
        f.conflict = err instanceof HfxError && err.status === 412;
        const byField = {};
        const other = [];
        for (const x of errors) {
          if (x.scope === "field" && x.target) byField[x.target] = byField[x.target] ? byField[x.target] + " " + x.message : x.message;
          else other.push(x.message);
        }
        f.errors = byField;
        f.recordErrors = other;
        f.saving = false;
        ctx.u(undefined, slot);
        return null;
      }
    },
    /** Loads the record again (after a conflict: the other person's version). */
    reload() {
      return load(f.id);
    },
    /** Deletes the record (`If-Match` its loaded version); resolves to whether it was deleted. */
    async remove() {
      if (f.id == null) return false;
      f.recordErrors = [];
      try {
        await send("DELETE", url(), undefined, undefined, version);
      } catch (err) {
        f.conflict = err instanceof HfxError && err.status === 412;
        f.recordErrors = errorsOf(err).map((x) => x.message);
        ctx.u(undefined, slot);
        return false;
      }
      e.dispatchEvent(new CustomEvent("deleted", { detail: f.id, bubbles: true }));
      await load(null);
      return true;
    },
    reset() {
      f.values = f.id == null ? {} : { ...loaded };
      f.errors = {};
      f.recordErrors = [];
      ctx.u(undefined, slot);
    },
  };
  // `f.values` is deeply reactive: code that sets `f.values.name = …` (a script function, an
  // event handler) updates the page like a bound input does.
  let values = deep(ctx, {}, slot);
  Object.defineProperty(f, "values", {
    enumerable: true,
    get: () => values,
    set: (next) => (values = deep(ctx, next || {}, slot)),
  });
  formScopes.set(f, scope);
  async function load(id) {
    const mine = ++seq;
    f.id = id;
    f.errors = {};
    f.recordErrors = [];
    f.conflict = false;
    version = null;
    if (id == null) {
      loaded = {};
      f.values = {};
      f.record = null;
      ctx.u(undefined, slot);
      return;
    }
    f.loading = true;
    ctx.u(undefined, slot);
    try {
      const res = await send("GET", url());
      if (mine !== seq) return;
      const record = res.data;
      version = res.etag;
      loaded = { ...record };
      f.values = { ...record };
      f.record = record;
    } catch (err) {
      if (mine !== seq) return;
      f.recordErrors = errorsOf(err).map((x) => x.message);
    }
    f.loading = false;
    ctx.u(undefined, slot);
  }
  e.addEventListener("submit", (event) => {
    event.preventDefault();
    f.save();
  });
  b.u([slot], () => {
    const shown = f.recordErrors;
    while (list.firstChild) list.firstChild.remove();
    for (const message of shown) text(el(list, "li"), message);
    list.hidden = shown.length === 0;
  });
  body(b, e, f);
  b.u(deps, () => {
    load(getId());
  });
  b.cleanups.push(() => {
    seq++;
  });
}

// The scope class of each form's screen, for the error elements the runtime makes.
const formScopes = new WeakMap();

/** Shows `f.errors[key]` right after the input that edits field `key`. */
export function field_error(b, input, f, key, deps) {
  const span = document.createElement("span");
  const scope = formScopes.get(f);
  span.setAttribute("class", scope ? "hfx-field-error " + scope : "hfx-field-error");
  span.setAttribute("role", "alert");
  span.setAttribute("data-field", key);
  input.after(span);
  if (!input.getAttribute("name")) input.setAttribute("name", key);
  b.u(deps, () => {
    const message = f.errors[key];
    set_text(span.firstChild || span.appendChild(document.createTextNode("")), message);
    span.hidden = !message;
    if (message) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  });
}
