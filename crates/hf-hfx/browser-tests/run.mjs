// Drives compiled HFX screens in headless Chromium.
//
// Usage: node run.mjs <base-url>. The Rust test `browser` (tests/it/browser.rs) compiles the
// fixture screens, serves them with the runtime and a fake /data API, and runs this script.
// Exits non-zero when a check fails; prints one line per check.
import { chromium } from "playwright-core";
import { launch, check, watch, eventually, poll, text, finish } from "./harness.mjs";

const base = process.argv[2];
if (!base) {
  console.error("usage: node run.mjs <base-url>");
  process.exit(2);
}

const browser = await launch(chromium);

async function screen(name, body, expectedStatus = [], expectedErrors = []) {
  const page = await browser.newPage();
  const problems = watch(page, { expectedStatus, expectedErrors });
  try {
    await page.goto(`${base}/page.html?screen=${name}`);
    await page.waitForFunction(() => window.hfxReady === true, null, { timeout: 10000 });
    await body(page);
  } catch (e) {
    check(`${name}: ran without exceptions`, false, String(e));
  }
  check(`${name}: no console errors`, problems.length === 0, problems.join("; "));
  await page.close();
}

/** `eventually` for the first element that matches `selector`. */
const eventuallyIn = (page, selector, want) => eventually(page.locator(selector), want);

await screen("counter", async (page) => {
  const button = page.locator("button").first();
  check("counter: initial text", (await button.textContent()) === "Clicked 0 times", await button.textContent());
  check("counter: reset disabled at 0", await page.locator("button").nth(1).isDisabled());
  await button.click();
  check("counter: singular after one click", await eventuallyIn(page, "button", "Clicked 1 time"));
  await button.click();
  await button.click();
  check("counter: increments on click", await eventuallyIn(page, "button", "Clicked 3 times"));
  check("counter: derived text updates", (await text(page, "p")) === "Doubled: 6");
  check("counter: reset enabled", !(await page.locator("button").nth(1).isDisabled()));
  await page.locator("button").nth(1).click();
  check("counter: inline handler assigns state", await eventuallyIn(page, "button", "Clicked 0 times"));
});

await screen("each_keyed", async (page) => {
  const items = () => page.locator("#list li").allTextContents();
  check("each: initial items", (await items()).length === 2);
  await page.evaluate(() => (document.querySelector("#list li").__mark = "first"));
  await page.fill("#draft", "Write the browser test");
  await page.click("#add");
  await page.waitForFunction(() => document.querySelectorAll("#list li").length === 3);
  const after = await items();
  check("each: item appended", after[2].includes("Write the browser test"), JSON.stringify(after));
  check("each: bound input cleared by handler", (await page.inputValue("#draft")) === "");
  check("each: count of open items", await eventuallyIn(page, "#left", "2 left"));
  await page.click("#reverse");
  await page.waitForFunction(() => document.querySelector("#list li").textContent.includes("browser test"));
  const moved = await page.evaluate(() => {
    const lis = [...document.querySelectorAll("#list li")];
    return { last: lis[2].__mark, index: lis[2].dataset.index };
  });
  check("each: keyed rows are moved, not recreated", moved.last === "first", JSON.stringify(moved));
  check("each: index updates after move", moved.index === "2", JSON.stringify(moved));
  await page.locator("#list li input[type=checkbox]").nth(0).check();
  check("each: bind:checked on an item updates the list", await eventuallyIn(page, "#left", "1 left"));
  check("each: class directive follows item", (await page.locator("#list li.done").count()) === 2);
  for (let i = 0; i < 3; i++) await page.locator("#list li button").first().click();
  check("each: {:else} when empty", await eventuallyIn(page, "#list", "Nothing to do"));
});

await screen("if_else", async (page) => {
  check("if: first branch", (await text(page, "#state")) === "zero");
  await page.click("#inc");
  check("if: else-if branch", await eventuallyIn(page, "#state", "odd 1"));
  await page.click("#inc");
  check("if: else branch", await eventuallyIn(page, "#state", "even 2"));
  check("if: block without else hidden", (await page.locator("#big").count()) === 0);
  await page.click("#inc");
  check("if: block appears", await eventuallyIn(page, "#big", "big"));
});

await screen("bind_value", async (page) => {
  check("bind: initial value", (await page.inputValue("#name")) === "world");
  await page.fill("#name", "HFX");
  check("bind:value text", await eventuallyIn(page, "#greeting", "Hello HFX!"));
  await page.check("#agree");
  check("bind:checked", await eventuallyIn(page, "#agreed", "agreed"));
  check("bind:value select initial", (await page.inputValue("#size")) === "m");
  await page.selectOption("#size", "l");
  check("bind:value select", await eventuallyIn(page, "#summary", "l:6"));
  await page.fill("#amount", "5");
  check("bind:value number", await eventuallyIn(page, "#summary", "l:10"));
});

await screen("escaping", async (page) => {
  const literal = await text(page, "#literal");
  check("escape: tag in expression renders as text", literal === "<img src=x onerror=alert(1)>", literal);
  check("escape: no element created", (await page.locator("img").count()) === 0);
  check("escape: state renders as text", (await text(page, "#state")) === "<img src=x onerror=alert(1)>");
  const href = await page.getAttribute("#link", "href");
  check("escape: javascript: URL neutralised", href.startsWith("unsafe:"), href);
  check("escape: entities decoded", (await text(page, "#entities")) === "<b> & © 😀 &unknown;");
});

await screen("with_sidecar", async (page) => {
  check("sidecar: function imported", (await text(page, "#greet")) === "Hello, HFX!");
  check("sidecar: enum compiled", (await page.getAttribute("#greet", "class")) === "calm");
  await page.click("#shout");
  check("sidecar: handler result", await eventuallyIn(page, "#shouted", "HELLO, HFX!"));
});

await screen("query_list", async (page) => {
  await page.waitForFunction(() => document.querySelectorAll("#accounts li").length === 3, null, { timeout: 5000 });
  check("query: records listed", (await page.locator("#accounts li").count()) === 3);
  await page.fill("#filter", "ac");
  const rerun = await page
    .waitForFunction(() => document.querySelectorAll("#accounts li").length === 1, null, { timeout: 5000 })
    .then(() => true, () => false);
  check("query: re-runs when the filter changes", rerun);
  check("query: filtered record", (await text(page, "#accounts li")).startsWith("Acme"));
  await page.fill("#filter", "zzz");
  check("query: empty result shows {:else}", await eventuallyIn(page, "#accounts li", "No accounts match “zzz”."));
});

await screen("form_record", async (page) => {
  await page.click("button[type=submit]");
  const fieldError = page.locator("input + .hfx-field-error").first();
  await fieldError.waitFor({ state: "visible", timeout: 5000 }).catch(() => {});
  check("form: field error next to its input", (await fieldError.textContent()) === "Name is required", await fieldError.textContent());
  check("form: input marked invalid", (await page.getAttribute("input >> nth=0", "aria-invalid")) === "true");
  const recordErrors = await page.locator(".hfx-form-errors li").allTextContents();
  check("form: record error above the form", recordErrors.includes("Accounts need an owner"), JSON.stringify(recordErrors));
  check("form: error elements take the screen's scoped style", (await fieldError.evaluate((e) => getComputedStyle(e).color)) === "rgb(200, 0, 0)");
  await page.click("#fill");
  check("form: f.values set by a script function updates the input", (await page.waitForFunction(() => document.querySelector("input").value === "Filled in", null, { timeout: 5000 }).then(() => true, () => false)));
  check("form: attributes option on the <form>", (await page.getAttribute("form#account-form", "class")).split(" ").includes("grid"));
  await page.fill("input >> nth=0", "bad");
  await page.click("button[type=submit]");
  check("form: validate refuses before sending", await eventuallyIn(page, "input + .hfx-field-error", "Not that name"));
  check("form: nothing was saved", (await text(page, "#saved")) === "Saved 0 times");
  await page.fill("input >> nth=0", "Initech");
  await page.click("button[type=submit]");
  check("form: saved event after create", await eventuallyIn(page, "#saved", "Saved 1 times"));
  check("form: errors cleared", (await page.locator(".hfx-field-error:visible").count()) === 0);
}, [422]);

await screen("class_directive_scoped", async (page) => {
  const classes = (sel) => page.evaluate((s) => [...document.querySelector(s).classList], sel);
  const alone = await classes("#alone");
  check("class: directive alone survives the scope class", alone.includes("active") && alone.some((c) => c.startsWith("hfx-")), JSON.stringify(alone));
  const after = await classes("#after");
  check("class: directive before class= survives it", after.includes("active") && after.includes("note") && after.some((c) => c.startsWith("hfx-")), JSON.stringify(after));
  check("class: directive in {#each} rows on first render", (await page.locator("li.odd").count()) === 1);
  await page.click("#toggle");
  await page.waitForFunction(() => !document.querySelector("#alone").classList.contains("active"));
  const off = await classes("#after");
  check("class: directive toggles off, keeps the rest", !off.includes("active") && off.includes("note"), JSON.stringify(off));
});

await screen("composition", async (page) => {
  check("snippets: children render inside the component", (await text(page, "#inside")) === "Count is 0");
  check("snippets: a named snippet prop renders", (await text(page, "#footer")) === "total: 0", await text(page, "#footer"));
  await page.click("#inc");
  check("snippets: children follow the owner's state", await eventuallyIn(page, "#inside", "Count is 1"));
  check("snippets: a snippet rendered in a snippet follows too", await eventuallyIn(page, "#footer", "total: 1"));
  const people = () => page.locator(".person").allTextContents();
  check("snippets: a row snippet gets its arguments", JSON.stringify(await people()) === JSON.stringify(["1. Ada", "2. Grace"]), JSON.stringify(await people()));
  await page.evaluate(() => (document.querySelector(".person").__mark = "kept"));
  await page.click("#rename");
  await page.waitForFunction(() => document.querySelector(".person").textContent === "1. Ada L.");
  check("snippets: new arguments update the row in place", await page.evaluate(() => document.querySelector(".person").__mark === "kept"));
  check("snippets: a component without children shows none", (await page.locator("#empty-card .body").textContent()) === "");
  await page.locator("h3", { hasText: "Counter" }).click();
  check("snippets: closing the card removes the children", (await page.locator("#inside").count()) === 0);
  await page.click("#outside");
  await page.locator("h3", { hasText: "Counter" }).click();
  check("snippets: reopening renders the current state", await eventuallyIn(page, "#inside", "Count is 11"));
  check("spread: attributes from an object", (await page.getAttribute("#spread", "data-kind")) === "spread" && (await page.getAttribute("#spread", "title")) === "from a spread");
  const classes = await page.evaluate(() => [...document.querySelector("#spread").classList]);
  check("spread: class directive kept next to it", classes.includes("wide"), JSON.stringify(classes));
  await page.click("#clear");
  check("snippets: the {:else} snippet", await eventuallyIn(page, ".list li", "nobody"));
  check("$props: a given prop", (await text(page, ".rating .label")) === "Stars");
  check("$props: a renamed key with its value", (await page.locator(".rating .star").count()) === 3);
  check("$props: children", (await text(page, "#rating-child")) === "of 3");
  check("$props: the bound value comes in", (await page.locator(".rating .star.on").count()) === 1);
  await page.locator(".rating .star").nth(1).click();
  check("$props: $bindable goes back to the parent", await eventuallyIn(page, "#stars", "2 stars"));
  check("$props: and the component shows it", (await page.locator(".rating .star.on").count()) === 2);
});

await screen("lifecycle", async (page) => {
  const data = (key) => page.evaluate((k) => document.body.dataset[k], key);
  const until = async (key, want) =>
    page.waitForFunction(([k, w]) => document.body.dataset[k] === w, [key, want], { timeout: 5000 }).then(() => true, () => false);
  // 4 tickers (one in the {#if}, three rows) with a timer and an effect each, 4 actions.
  check("lifecycle: onMount, $effect and actions ran", await until("live", "12"), await data("live"));
  check("lifecycle: the effect ran after mount", (await data("shown")) === "0");
  await page.click("#inc");
  check("effect: re-runs after the DOM update", await until("shown", "1"), await data("shown"));
  check("effect: its cleanup ran before", (await data("cleaned")) === "1", await data("cleaned"));
  check("action: update gets the new parameter", (await page.getAttribute("#shown i", "data-action")) === "if 1");
  await page.click("#toggle");
  check("destroy: {#if} false cleans its component and action", await until("live", "9"), await data("live"));
  check("destroy: onDestroy ran", (await data("destroyed")) === "1");
  await page.click("#drop");
  check("destroy: a removed {#each} row cleans up", await until("live", "6"), await data("live"));
  check("state: splice on $state array updates", (await page.locator("li").count()) === 2);
  await page.click("#rename");
  check("state: nested assignment in a $state array", await eventuallyIn(page, "li .ticker", "row 10"));
  await page.click("#toggle");
  check("lifecycle: re-created {#if} content mounts again", await until("live", "9"), await data("live"));
  await page.click("#push");
  await page.click("#push");
  check("state: push updates the page and $derived", await eventuallyIn(page, "#items", "2 items, derived 4, many"));
  await page.click("#splice");
  check("state: splice updates", await eventuallyIn(page, "#items", "1 items, derived 2, few"));
  await page.click("#move");
  check("state: nested object assignment", await eventuallyIn(page, "#city", "Lyon"));
  await page.click(".step");
  check("bind:prop: the child's change reaches the parent", await eventuallyIn(page, "#count", "2"));
  check("bind:prop: and comes back down", await eventuallyIn(page, ".step", "step 2"));
  await page.click("#wait");
  check("tick: resolves after the DOM update", await until("afterTick", "42"), await data("afterTick"));
  await page.evaluate(() => window.hfxApp.destroy());
  check("destroy: unmounting the screen cleans everything", await until("live", "0"), await data("live"));
  const ticks = await page.evaluate(() => new Promise((r) => setTimeout(() => r(document.querySelectorAll(".ticker").length), 200)));
  check("destroy: nothing left in the DOM", ticks === 0);
});

await screen("await_key", async (page) => {
  check("await: pending part", (await text(page, "#await")) === "loading 0");
  await page.click("#resolve");
  check("await: then part with the value", await eventuallyIn(page, "#await", "result 0"));
  await page.click("#again");
  check("await: a new promise shows pending again", await eventuallyIn(page, "#await", "loading 1"));
  await page.click("#resolve");
  check("await: then again", await eventuallyIn(page, "#await", "result 1"));
  await page.click("#fail");
  await page.click("#resolve");
  check("await: catch part with the error", await eventuallyIn(page, "#await.error", "no luck 2"));
  check("await: short form", await eventuallyIn(page, "#short", "7"));
  await page.evaluate(() => (document.querySelector("#keyed").__mark = 1));
  await page.fill("#keyed", "typed");
  await page.click("#bump");
  await page.waitForFunction(() => document.querySelector("#keyed").__mark === undefined, null, { timeout: 5000 }).catch(() => {});
  check("key: content is made anew when the value changes", (await page.inputValue("#keyed")) === "" && (await page.evaluate(() => document.querySelector("#keyed").__mark)) === undefined);
});

await screen("big_list", async (page) => {
  // Records every DOM mutation under the table while `action` runs, and says which rows
  // (data-id of the enclosing or moved <tr>) they touched.
  async function mutations(action, until) {
    await page.evaluate(() => {
      window.__records = [];
      window.__observer = new MutationObserver((list) => window.__records.push(...list));
      window.__observer.observe(document.querySelector("#rows"), { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await action();
    await page.waitForFunction(until);
    return page.evaluate(() => {
      window.__observer.disconnect();
      const row = (n) => (n && n.nodeType === 1 ? n.closest("tr") : n && n.parentElement && n.parentElement.closest("tr"));
      const ids = new Set();
      for (const r of window.__records) {
        for (const n of [r.target, ...r.addedNodes, ...r.removedNodes]) {
          const tr = row(n);
          if (tr) ids.add(tr.dataset.id);
        }
      }
      return { count: window.__records.length, rows: [...ids] };
    });
  }
  check("keyed: 1,000 rows", (await page.locator("#rows tr").count()) === 1000);
  let m = await mutations(() => page.click("#change"), () => document.querySelector('tr[data-id="500"]').textContent.includes("changed"));
  console.log(`     one row changed through $state: ${m.count} mutation records, rows ${JSON.stringify(m.rows)}`);
  check("keyed: changing one row touches only that row", JSON.stringify(m.rows) === '["500"]', JSON.stringify(m));
  m = await mutations(() => page.click("#replace"), () => document.querySelector('tr[data-id="700"]').textContent.includes("seven"));
  console.log(`     one row replaced in a new array: ${m.count} mutation records, rows ${JSON.stringify(m.rows)}`);
  check("keyed: a new array with one new row touches only that row", JSON.stringify(m.rows) === '["700"]', JSON.stringify(m));
  m = await mutations(() => page.click("#swap"), () => document.querySelectorAll("#rows tr")[1].dataset.id === "998");
  console.log(`     two rows swapped: ${m.count} mutation records, rows ${JSON.stringify(m.rows.sort())}`);
  check("keyed: a swap moves the two rows only", JSON.stringify(m.rows.sort()) === '["1","998"]', JSON.stringify(m));
  m = await mutations(() => page.click("#remove"), () => document.querySelectorAll("#rows tr").length === 999);
  console.log(`     one row removed: ${m.count} mutation records`);
  check("keyed: removing a row renumbers the rest in place", (await page.locator("#rows tr").nth(300).locator("td").first().textContent()) === "300");
});

await screen("typed_binds", async (page) => {
  check("select: initial typed value selected", (await page.inputValue("#size")) === "25");
  await page.selectOption("#size", "50");
  check("select: option values keep their type", await eventuallyIn(page, "#size-out", "number:50"));
  await page.locator(".flavour").nth(2).check();
  check("bind:group checkbox adds", await eventuallyIn(page, "#flavours", "vanilla,mint"));
  await page.locator(".flavour").nth(0).uncheck();
  check("bind:group checkbox removes", await eventuallyIn(page, "#flavours", "mint"));
  check("bind:group radio initial", await page.isChecked("#basic"));
  await page.check("#pro");
  check("bind:group radio", await eventuallyIn(page, "#plan", "pro"));
  await page.selectOption("#multi", ["25", "50"]);
  check("select multiple: typed array", await eventuallyIn(page, "#picked", "[25,50]"));
  await page.click("#pick-more");
  check("select multiple: state to options", await eventuallyIn(page, "#picked", "[25,50,10]"));
  check("select multiple: push selects the option", (await page.evaluate(() => [...document.querySelector("#multi").selectedOptions].length)) === 3);
  await page.fill("#amount", "12.5");
  check("number input: a number", await eventuallyIn(page, "#amount-out", "number:12.5"));
  await page.fill("#amount", "99999999999999999999.5");
  check("number input: digits a double would lose stay text", await eventuallyIn(page, "#amount-out", "string:99999999999999999999.5"));
  check("number input: the field keeps the digits", (await page.inputValue("#amount")) === "99999999999999999999.5");
  await page.click("#which");
  check("bind:this", await eventuallyIn(page, "#box-tag", "DIV"));
});

await screen("form_conflict", async (page) => {
  await page.waitForFunction(() => document.querySelector("#name").value === "Acme", null, { timeout: 5000 });
  check("form: loads the record", true);
  await page.fill("#name", "Acme Mine");
  // Someone else saves in between (no If-Match: always applies).
  await page.evaluate(() => fetch("/data/crm/account/1", { method: "PATCH", headers: { authorization: "Bearer test-token", "content-type": "application/json" }, body: JSON.stringify({ name: "Acme Theirs" }) }));
  await page.click("#save");
  const shown = await page.waitForFunction(() => [...document.querySelectorAll(".hfx-form-errors li")].some((li) => li.textContent.includes("changed by someone else")), null, { timeout: 5000 }).then(() => true, () => false);
  check("form: a 412 shows as a record-level error", shown);
  check("form: f.conflict", (await page.locator("#reload").count()) === 1);
  await page.click("#reload");
  await page.waitForFunction(() => document.querySelector("#name").value === "Acme Theirs", null, { timeout: 5000 });
  check("form: reload shows their version", true);
  await page.fill("#name", "Acme Merged");
  await page.click("#save");
  let saved = null;
  for (let i = 0; i < 50 && (!saved || saved.name !== "Acme Merged"); i++) {
    await page.waitForTimeout(100);
    saved = await page.evaluate(() => fetch("/data/crm/account/1", { headers: { authorization: "Bearer test-token" } }).then((r) => r.json()));
  }
  check("form: saving with the new version succeeds", saved.name === "Acme Merged", JSON.stringify(saved));
  check("form: no error after it", (await page.locator(".hfx-form-errors li").count()) === 0);
  await page.click("#delete");
  check("form: remove() deletes and dispatches `deleted`", await eventuallyIn(page, "#deleted", "1"));
}, [412]);

await screen("query_options", async (page) => {
  const calls = () => page.evaluate(() => performance.getEntriesByType("resource").filter((e) => e.name.endsWith("/data/query")).length);
  await page.waitForFunction(() => document.querySelectorAll("#found li").length === 3, null, { timeout: 5000 });
  check("query: count option gives the total", (await text(page, "#total")) === "3 in all");
  check("query: first run is one query and its count", (await calls()) === 2, String(await calls()));
  await page.locator("#filter").pressSequentially("glo", { delay: 20 });
  await page.waitForFunction(() => document.querySelector("#total").textContent === "1 in all", null, { timeout: 5000 });
  check("query: debounce runs once after typing pauses", (await calls()) === 4, String(await calls()));
  await page.locator("#filter").pressSequentially("  ", { delay: 20 });
  await page.waitForTimeout(400);
  check("query: same parameter values do not run it again", (await calls()) === 4, String(await calls()));
});

await screen("effect_loop", async (page) => {
  await page.waitForTimeout(300);
  const n = Number(await text(page, "#n"));
  check("effect: a loop is stopped, the page stays responsive", n > 50 && n < 1000, String(n));
}, [], ["effects keep changing the state they read"]);

await screen("instance_api", async (page) => {
  const input = page.locator(".text-field input");
  const attr = (name) => input.getAttribute(name);
  check("rest: props the component does not name reach the input", (await attr("placeholder")) === "Your name" && (await attr("maxlength")) === "5" && (await attr("data-extra")) === "one", JSON.stringify([await attr("placeholder"), await attr("maxlength"), await attr("data-extra")]));
  check("rest: its own props stay out of the rest", (await attr("label")) === null && (await attr("value")) === null);
  check("rest: the bound prop still binds", (await input.inputValue()) === "Ada");
  await page.click("#limit");
  check("rest: a new value of a rest prop updates the input", await poll(async () => (await attr("maxlength")) === "8"), String(await attr("maxlength")));
  await page.click("#extra");
  check("rest: a prop that went away leaves the input", await poll(async () => (await attr("data-extra")) === null && (await attr("data-other")) === "two"), JSON.stringify([await attr("data-extra"), await attr("data-other")]));
  await page.click("#focus");
  check("bind:this: calls an exported function of the component", await poll(() => input.evaluate((e) => document.activeElement === e)));
  await page.click("#kind");
  check("bind:this: reads an exported constant", await eventuallyIn(page, "#kind-out", "text-field"), await text(page, "#kind-out"));
  await page.click("#clear");
  check("bind:this: an exported function assigns the component's state (and the binding)", await eventuallyIn(page, "#name", ""), await text(page, "#name"));
  await page.click("#hide");
  await page.click("#kind");
  check("bind:this: null once the component is destroyed", await eventuallyIn(page, "#kind-out", "none"), await text(page, "#kind-out"));
});

await finish(browser);
