// End-to-end checks of HFX screens in headless Chromium, through the real hf server and the real
// cookie flow: for every page, POST /auth/session with the principal's token, open
// /auth/session/exchange?code=…&screen=crm/<screen> (the rendering frame, which sets the
// hf_runtime cookie and mounts the screen), then act on the page like a user.
//
// Usage: HF_TOKEN=<bearer token> node run.mjs <base-url> [scenario ...]
// Run by the Rust test `hfx::screens_run_in_chromium_through_the_real_server`, which starts the
// server with the demo CRM and writes the screens these scenarios open. Prints one line per check
// and exits non-zero when one fails.
import { chromium } from "playwright-core";
import { launch, check, watch, eventually, text, until, runScenarios } from "../../hf-hfx/browser-tests/harness.mjs";

const [base, ...wanted] = process.argv.slice(2);
const token = process.env.HF_TOKEN;
if (!base || !token) {
  console.error("usage: HF_TOKEN=<token> node run.mjs <base-url> [scenario ...]");
  process.exit(2);
}

const browser = await launch(chromium);

/** A one-time code from POST /auth/session, as a host application would get it. */
async function sessionCode() {
  const res = await fetch(`${base}/auth/session`, { method: "POST", headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`POST /auth/session: ${res.status} ${await res.text()}`);
  return (await res.json()).code;
}

/** Opens the rendering frame on `screen`, waits until it has mounted (or failed), runs `body`. */
async function frame(name, screen, body, { expectFailure = false, expectedStatus = [], expectedErrors = [] } = {}) {
  const page = await browser.newPage();
  const problems = watch(page, { expectedStatus, expectedErrors });
  try {
    const response = await page.goto(`${base}/auth/session/exchange?code=${await sessionCode()}&screen=${screen}`);
    check(`${name}: the frame answers 200`, response.status() === 200, String(response.status()));
    await page.waitForSelector("#hf-root[data-hfx-state]", { timeout: 10000 });
    const state = await page.getAttribute("#hf-root", "data-hfx-state");
    const why = await page.locator("#hf-root").textContent();
    check(`${name}: the screen ${expectFailure ? "fails to load" : "mounts"}`, state === (expectFailure ? "failed" : "mounted"), `${state}: ${why}`);
    await body(page);
  } catch (e) {
    check(`${name}: ran without exceptions`, false, String(e));
  }
  if (!expectFailure) check(`${name}: no console errors`, problems.length === 0, problems.join("; "));
  await page.close();
}

/** `eventually` for the first element that matches `selector`. */
const eventuallyIn = (page, selector, want) => eventually(page.locator(selector), want);

/** The hf API as the test's principal (from node, not the page). */
async function api(method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

const scenarios = {
  async paging() {
    // `{#query … { paged: true }}` over 45 seeded accounts "Paged 000"…"Paged 044", ten a page,
    // while another client inserts accounts before and after the position read so far.
    await frame("paging", "crm/crm_account_pages", async (page) => {
      const names = (selector) => page.locator(`${selector} li`).allTextContents();
      check("paging: the first page", await eventuallyIn(page, "#grown-state", "10 shown, more to load"), await text(page, "#grown-state"));
      // Inserted while the list is read: one sorts before what was read (it must not shift the
      // pages still to come), one after (it shows once, on its page).
      await api("POST", "/data/crm/account", { name: "Paged 000a" });
      await api("POST", "/data/crm/account", { name: "Paged 030a" });
      for (let shown = 20; shown <= 46; shown = Math.min(shown + 10, 46)) {
        await page.click("#load-more");
        const want = shown === 46 ? "46 shown, all loaded" : `${shown} shown, more to load`;
        if (!(await eventuallyIn(page, "#grown-state", want))) {
          check(`paging: load more reaches ${shown}`, false, await text(page, "#grown-state"));
          break;
        }
        if (shown === 46) break;
      }
      const grown = await names("#grown");
      const seeded = Array.from({ length: 45 }, (_, i) => `Paged ${String(i).padStart(3, "0")}`);
      check("paging: load more lost no row", seeded.every((n) => grown.includes(n)), JSON.stringify(grown));
      check("paging: load more repeated no row", new Set(grown).size === grown.length, JSON.stringify(grown));
      check("paging: a row inserted after the position shows once", grown.filter((n) => n === "Paged 030a").length === 1);
      check("paging: a row inserted before the position does not shift the pages", !grown.includes("Paged 000a"));
      check("paging: load more is done", await page.locator("#load-more").isDisabled());

      // One page at a time: forwards to the end, then back.
      check("paging: page 1", await eventuallyIn(page, "#page-state", "page 1"), await text(page, "#page-state"));
      check("paging: no previous page on the first", await page.locator("#previous").isDisabled());
      const first = await names("#page");
      const seen = [...first];
      await api("POST", "/data/crm/account", { name: "Paged 000b" });
      for (let n = 2; n <= 5; n++) {
        await page.click("#next");
        const want = n === 5 ? "page 5 (last)" : `page ${n}`;
        check(`paging: next shows page ${n}`, await eventuallyIn(page, "#page-state", want), await text(page, "#page-state"));
        const rows = await names("#page");
        if (n === 2) check("paging: page 2 starts after page 1", rows[0] > first[first.length - 1], JSON.stringify(rows));
        seen.push(...rows);
      }
      check("paging: next is done on the last page", await page.locator("#next").isDisabled());
      check("paging: pages lost no row", seeded.every((n) => seen.includes(n)), JSON.stringify(seen));
      check("paging: pages repeated no row", new Set(seen).size === seen.length, JSON.stringify(seen));
      await page.click("#previous");
      check("paging: previous goes back a page", await eventuallyIn(page, "#page-state", "page 4"), await text(page, "#page-state"));
      check("paging: and shows it again", JSON.stringify(await names("#page")) === JSON.stringify(seen.slice(30, 40)), JSON.stringify(await names("#page")));
    });
  },

  async vendor() {
    // uPlot (pinned in package.json), uploaded as crm/vendor/uplot.esm.js and imported by the
    // screen `vendor_chart` as "uplot.esm.js": it draws a line chart into a canvas.
    await frame("vendor", "crm/vendor_chart", async (page) => {
      check("vendor: the library drew its chart", await eventuallyIn(page, "#drawn", "drawn"), await text(page, "#drawn"));
      const painted = await page.locator("#chart canvas").evaluate((canvas) => {
        const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        let count = 0;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) count++;
        return count;
      });
      check("vendor: the canvas has painted pixels", painted > 100, String(painted));
      const url = await page.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name).find((n) => n.includes("/hfx/vendor/") && n.endsWith("/crm/uplot.esm.js")));
      check("vendor: loaded from its tree's address", /\/hfx\/vendor\/[0-9a-f]{40}\/crm\/uplot\.esm\.js$/.test(url || ""), String(url));
    });
  },

  async vendorPreview() {
    // The console's preview of a screen not saved yet that imports the vendored uPlot: compiled
    // with `POST /hfx/compile {moduleKey: "crm"}` (its bare import becomes the file's address in
    // the live branch), then handed to the rendering frame in `#preview` mode by a parent page of
    // the origin (the console page), which runs it as `blob:` modules under the frame's policy.
    const source = `<script>
  import { onMount } from "hfx";
  import uPlot from "uplot.esm.js";
  let chart;
  let drawn = $state("");
  onMount(() => {
    const options = { width: 200, height: 100, series: [{}, { stroke: "blue", width: 2 }], hooks: { draw: [() => { drawn = "drawn before saving"; }] } };
    const plot = new uPlot(options, [[1, 2, 3], [2, 3, 1]], chart);
    return () => plot.destroy();
  });
</script>
<div id="chart" bind:this={chart}></div>
<p id="drawn">{drawn}</p>
`;
    const compiled = await api("POST", "/hfx/compile", { source, moduleKey: "crm" });
    check("vendor preview: the text compiles", compiled.status === 200, compiled.text);
    const js = JSON.parse(compiled.text).compiledJs;
    check("vendor preview: the import names the file in the live branch", /from "\/hfx\/vendor\/[0-9a-f]{40}\/crm\/uplot\.esm\.js"/.test(js), js.slice(0, 300));
    const page = await browser.newPage();
    const problems = watch(page);
    try {
      await page.goto(`${base}/`);
      const url = `/auth/session/exchange?code=${await sessionCode()}&screen=crm/vendor_chart#preview`;
      await page.evaluate(
        ({ url, js }) =>
          new Promise((resolve) => {
            const frame = document.createElement("iframe");
            frame.id = "preview";
            addEventListener("message", (event) => {
              if (event.source === frame.contentWindow && event.data && event.data.hfxPreviewReady) {
                frame.contentWindow.postMessage({ hfxPreview: { js, sidecar: null } }, location.origin);
                resolve();
              }
            });
            frame.src = url;
            document.body.append(frame);
          }),
        { url, js },
      );
      const preview = page.frameLocator("#preview");
      check("vendor preview: the library drew its chart", await eventually(preview.locator("#drawn"), "drawn before saving"), await preview.locator("#hf-root").textContent());
      const frame = page.frames().find((f) => f !== page.mainFrame());
      const loaded = await frame.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name).find((n) => n.endsWith("/crm/uplot.esm.js")));
      check("vendor preview: loaded from its tree's address", /\/hfx\/vendor\/[0-9a-f]{40}\/crm\/uplot\.esm\.js$/.test(loaded || ""), String(loaded));
    } catch (e) {
      check("vendor preview: ran without exceptions", false, String(e));
    }
    check("vendor preview: no console errors", problems.length === 0, problems.join("; "));
    await page.close();
  },

  async crm() {
    await frame("crm accounts", "crm/crm_accounts", async (page) => {
      const names = () => page.locator("td.name").allTextContents();
      check("accounts: the count", await eventuallyIn(page, "#count", "3 accounts"));
      check("accounts: first page, by name", JSON.stringify(await names()) === '["Acme","Globex"]', JSON.stringify(await names()));
      await page.click("#next");
      check("accounts: next page", await eventuallyIn(page, "td.name", "Initech"));
      check("accounts: page of pages", await eventuallyIn(page, "#page", "page 2 of 2"));
      await page.locator("th", { hasText: "Name" }).click();
      check("accounts: sorted descending from page 1", await eventuallyIn(page, "td.name", "Initech"));
      check("accounts: the sorted column is marked", (await page.locator("th.sorted").textContent()).includes("▼"));
      await page.fill("#filter", "glo");
      check("accounts: filtered count", await eventuallyIn(page, "#count", "1 accounts"));
      check("accounts: filtered rows", JSON.stringify(await names()) === '["Globex"]', JSON.stringify(await names()));
      await page.locator("td.name", { hasText: "Globex" }).click();
      check("accounts: a row opens another screen", await eventuallyIn(page, "#biggest li", "Globex expansion (Globex): 12,000"));
    });
    await frame("crm dashboard", "crm/crm_dashboard", async (page) => {
      await until(page, () => document.querySelectorAll(".stat").length === 3);
      const cards = await page.locator(".stat").evaluateAll((els) => els.map((e) => [...e.children].map((c) => c.textContent).join("|")));
      check("dashboard: a card per stage with its total", JSON.stringify(cards) === JSON.stringify(["proposal|5,000|1 deal", "prospecting|12,800|2 deals", "won|3,000|1 deal"]), JSON.stringify(cards));
      // The list is a query of its own: wait for it as for the cards.
      await until(page, () => document.querySelectorAll("#biggest li").length === 3);
      const biggest = await page.locator("#biggest li").allTextContents();
      check("dashboard: biggest open opportunities", JSON.stringify(biggest) === JSON.stringify(["Globex expansion (Globex): 12,000", "Acme renewal (Acme): 5,000", "Acme upsell (Acme): 800"]), JSON.stringify(biggest));
      await page.locator("#biggest li").first().click();
      check("edit: opened from the dashboard with the record", await until(page, () => document.querySelector("#name")?.value === "Globex expansion"));
      const id = new URL(page.url()).hash.split("id=")[1];
      check("edit: the stage select shows the record's", (await page.inputValue("#stage")) === "prospecting");
      await page.fill("#name", "Something else");
      await page.click("#cancel");
      check("edit: cancel restores the values", (await page.inputValue("#name")) === "Globex expansion");
      await page.fill("#probability", "150");
      await page.click("#save");
      check("edit: a rule failure shows next to its input", await eventuallyIn(page, "#probability + .hfx-field-error", "The probability is a percentage between 0 and 100."));
      await page.fill("#probability", "60");
      await page.fill("#amount", "12345678901234567890.25");
      await page.fill("#account-filter", "init");
      await until(page, () => document.querySelectorAll("#account option").length === 1);
      check("edit: the account picker filters", (await page.locator("#account option").allTextContents()).join() === "Initech");
      await page.selectOption("#account", { label: "Initech" });
      await page.click("#save");
      check("edit: saved", await eventuallyIn(page, "#saved", "Globex expansion"));
      const stored = await api("GET", `/data/crm/opportunity/${id}`);
      check("edit: the decimal keeps its digits", stored.text.includes("12345678901234567890.25"), stored.text);
      const initech = JSON.parse((await api("POST", "/data/query", { query: "SELECT id FROM crm.account WHERE name = 'Initech'" })).text).records[0].id;
      check("edit: the lookup picker saved the account", JSON.parse(stored.text).account === initech, stored.text);
      await api("PATCH", `/data/crm/opportunity/${id}`, { name: "Changed elsewhere" });
      await page.fill("#probability", "70");
      await page.click("#save");
      check("edit: a conflict (412) shows above the form", await until(page, () => document.querySelectorAll(".hfx-form-errors li").length === 1 && document.querySelector("#reload") !== null));
      await page.click("#reload");
      check("edit: reload shows the other version", await until(page, () => document.querySelector("#name").value === "Changed elsewhere"));
    }, { expectedStatus: [412, 422] });
  },

  async navigate() {
    await frame("navigate", "crm/nav_list", async (page) => {
      check("navigate: the frame leaves the exchange address (and its code)", page.url().endsWith("/hfx/modules/frame#crm/nav_list"), page.url());
      await page.click("#open");
      check("navigate: another screen of the branch opens", await eventuallyIn(page, "#record", "record 42 (from the address)"));
      check("navigate: its props come from the address", page.url().endsWith("/hfx/modules/frame#crm/nav_detail?id=42"), page.url());
      const reload = await page.reload();
      check("navigate: a reload is answered while the cookie is valid", reload.status() === 200, String(reload.status()));
      check("navigate: and shows the same screen", await eventuallyIn(page, "#record", "record 42 (from the address)"));
      await page.goBack();
      check("navigate: Back returns to the first screen", await eventuallyIn(page, "#open", "Open record 42"));
      const bare = await fetch(`${base}/hfx/modules/frame`);
      check("navigate: the frame address needs the cookie", bare.status === 401, String(bare.status));
    });
  },

  async counter() {
    await frame("counter", "crm/counter", async (page) => {
      const button = page.locator("button").first();
      check("counter: starts at 0", (await button.textContent()) === "0", await button.textContent());
      await button.click();
      await button.click();
      await button.click();
      check("counter: increments on click", await eventuallyIn(page, "button", "3"));
      // The cookie the exchange set is HttpOnly: the page's scripts cannot read it.
      check("counter: the session cookie is HttpOnly", !(await page.evaluate(() => document.cookie)).includes("hf_runtime"));
    });
  },

  async escaping() {
    await frame("escaping", "crm/escaping", async (page) => {
      const payload = '<img src=x onerror="window.__pwned = true">';
      check("escaping: {expression} renders markup as text", (await text(page, "#text")) === payload, await text(page, "#text"));
      check("escaping: attribute values stay values", (await page.getAttribute("#attr", "title")) === payload);
      check("escaping: bound input shows the text", (await page.inputValue("#input")) === payload);
      await page.click("#more");
      check("escaping: updated text stays text", await eventuallyIn(page, "#text", payload + "<b>bold</b>"));
      check("escaping: no element was created", (await page.locator("#hf-root img, #hf-root b").count()) === 0);
      await page.waitForTimeout(200);
      check("escaping: no handler ran", (await page.evaluate(() => window.__pwned)) === undefined);
    });
  },

  async styled() {
    await frame("styled", "crm/styled", async (page) => {
      const card = page.locator(".card").first();
      const style = await card.evaluate((e) => {
        const s = getComputedStyle(e);
        return `${s.color} ${s.marginLeft}`;
      });
      check("styled: scoped <style> applies under the frame's CSP", style.startsWith("rgb(1, 2, 3)"), style);
      check("styled: style attribute applies under the frame's CSP", style.endsWith(" 7px"), style);
      check("styled: the sidecar is imported", (await text(page, "#doubled")) === "4", await text(page, "#doubled"));
      await page.click("#inc");
      check("styled: sidecar function re-renders on change", await eventuallyIn(page, "#doubled", "6"));
      check("styled: imported screen component renders its props", await eventuallyIn(page, ".badge", "n=3"));
      const weight = await page.locator(".badge").evaluate((e) => getComputedStyle(e).fontWeight);
      check("styled: the component's own style applies", weight === "700", weight);
    });
  },

  async missing() {
    await frame(
      "missing",
      "crm/missing",
      async (page) => {
        check("missing: says why", (await text(page, "#hf-root")).includes("There is no screen `missing`"), await text(page, "#hf-root"));
      },
      { expectFailure: true },
    );
  },

  async query() {
    await frame("query", "crm/account_search", async (page) => {
      check("query: lists every account", await eventuallyIn(page, "#count", "3"), await text(page, "#count"));
      const names = await page.locator("li").allTextContents();
      check("query: ordered by name", names.join(",") === "Acme,Globex,Initech", names.join(","));
      await page.fill("#filter", "o");
      check("query: re-runs when the filter changes", await eventuallyIn(page, "#count", "1"), await text(page, "#count"));
      check("query: shows the matching record", (await page.locator("li").allTextContents()).join(",") === "Globex");
      await page.fill("#filter", "zzz");
      check("query: an empty result shows the else branch", await eventuallyIn(page, "#empty", "No accounts"));
      await page.fill("#filter", "");
      check("query: back to every account", await eventuallyIn(page, "#count", "3"));
    });
  },

  async form() {
    await frame("form", "crm/account_form", async (page) => {
      await page.fill("#name", "x");
      await page.fill("#name", "");
      await page.fill("#email", "nobody@example.com");
      await page.click("button[type=submit]");
      const nameError = page.locator('.hfx-field-error[data-field="name"]');
      await nameError.waitFor({ state: "visible", timeout: 5000 }).catch(() => {});
      check("form: the rule failure shows next to the name input", (await nameError.textContent()) === "A name is required.", await nameError.textContent());
      check(
        "form: the error follows its input",
        await page.evaluate(() => document.querySelector("#name").nextElementSibling?.getAttribute("data-field") === "name"),
      );
      check("form: the input is marked invalid", (await page.getAttribute("#name", "aria-invalid")) === "true");
      check("form: no error next to the email input", (await page.locator('.hfx-field-error[data-field="email"]').isHidden()));
      await page.fill("#name", "Umbrella");
      await page.click("button[type=submit]");
      check("form: a valid record is created", await eventuallyIn(page, "#saved", "Umbrella"), await text(page, "#saved"));
      check("form: the error is gone", await nameError.isHidden());

      // A create whose answer is lost on the way back: the server made the record, the page
      // saw the connection fail. Saving again sends the same Idempotency-Key, and the server
      // answers with that record instead of making a second.
      const keys = [];
      let lost = false;
      await page.route("**/data/crm/account", async (route) => {
        keys.push(route.request().headers()["idempotency-key"]);
        if (lost) return route.continue();
        lost = true;
        await route.fetch();
        await route.abort("connectionreset");
      });
      await page.fill("#name", "Wayne");
      await page.click("button[type=submit]");
      check("form: the lost answer shows as a failure", await until(page, () => document.querySelectorAll(".hfx-form-errors li").length === 1));
      await page.click("button[type=submit]");
      check("form: saving again shows the record", await eventuallyIn(page, "#saved", "Wayne"), await text(page, "#saved"));
      check("form: both saves sent one key", keys.length === 2 && /^[0-9a-f]{32}$/.test(keys[0]) && keys[0] === keys[1], JSON.stringify(keys));
      await page.unroute("**/data/crm/account");
      const found = await fetch(`${base}/data/query`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ query: "SELECT id FROM crm.account WHERE name = :name", params: { name: "Wayne" } }),
      });
      const records = (await found.json()).records;
      check("form: one record was made", records.length === 1, JSON.stringify(records));
    }, { expectedStatus: [422], expectedErrors: ["ERR_CONNECTION_RESET"] });
  },
};

await runScenarios(browser, scenarios, wanted);
