// End-to-end checks of the hf console (the HFX application at `/`) in headless Chromium, through
// the real server: a user logs in with the form, moves through the areas and uses them.
//
// Usage: HF_ADMIN_NAME=… HF_ADMIN_PASSWORD=… [HF_USER_NAME=… HF_USER_PASSWORD=…]
//        [HF_SCREENSHOTS=<dir>] node console.mjs <base-url> [scenario ...]
// Run by the Rust test `console::the_console_works_in_chromium`, which starts the server with the
// demo CRM and some records. Prints one line per check, a screenshot of every view into
// HF_SCREENSHOTS, the first load's size, and exits non-zero when a check fails.
import { chromium } from "playwright-core";
import { launch, check, watch, eventually, eventuallyValue, eventuallyCount, poll, runScenarios } from "../../hf-hfx/browser-tests/harness.mjs";
import { gzipSync } from "node:zlib";
import { mkdirSync } from "node:fs";
import { generateKeyPairSync } from "node:crypto";

const [base, ...wanted] = process.argv.slice(2);
const admin = { name: process.env.HF_ADMIN_NAME, password: process.env.HF_ADMIN_PASSWORD };
const user = { name: process.env.HF_USER_NAME, password: process.env.HF_USER_PASSWORD };
const shots = process.env.HF_SCREENSHOTS || "";
if (!base || !admin.name || !admin.password) {
  console.error("usage: HF_ADMIN_NAME=… HF_ADMIN_PASSWORD=… node console.mjs <base-url> [scenario ...]");
  process.exit(2);
}
if (shots) mkdirSync(shots, { recursive: true });

const browser = await launch(chromium);

/**
 * Writes a screenshot of the view, and checks that every form control on it has a label (a
 * `<label>`, `aria-label` or `aria-labelledby`).
 */
async function shot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
  const unlabelled = await page.evaluate(() =>
    Array.from(document.querySelectorAll("input, select, textarea"))
      .filter((e) => e.type !== "hidden" && e.labels.length === 0 && !e.getAttribute("aria-label") && !e.getAttribute("aria-labelledby"))
      .map((e) => e.outerHTML.slice(0, 80)),
  );
  check(`${name}: every input has a label`, unlabelled.length === 0, JSON.stringify(unlabelled));
}

/**
 * Opens the console in a fresh browser context (its own sessionStorage) at 1280×800, runs `body`,
 * and checks that no console error, page error or dialog happened. Chromium logs every non-2xx
 * response as an error; statuses the scenario provokes on purpose are listed in `expectedStatus`.
 */
async function consolePage(name, body, { expectedStatus = [], expectedErrors = [], viewport = { width: 1280, height: 800 } } = {}) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems = watch(page, { expectedStatus, expectedErrors });
  try {
    await body(page);
  } catch (e) {
    check(`${name}: ran without exceptions`, false, String(e && e.stack ? e.stack : e));
    await shot(page, `failed-${name}`);
  }
  check(`${name}: no console errors`, problems.length === 0, problems.join("; "));
  await context.close();
}

async function login(page, who) {
  await page.goto(`${base}/`);
  await page.getByLabel("Username").fill(who.name);
  await page.getByLabel("Password", { exact: true }).fill(who.password);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("button", { name: "Log out" }).waitFor({ timeout: 10000 });
}

/** A token for `who`, for setting things up behind the console's back. */
async function tokenOf(who) {
  const res = await fetch(`${base}/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: who.name, password: who.password }) });
  return (await res.json()).token;
}

/** Calls the API directly as `who`. */
async function call(who, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${await tokenOf(who)}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
}

/** An OpenSSH ed25519 public key line for a fresh key. */
function sshKey(comment) {
  const { publicKey } = generateKeyPairSync("ed25519");
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(-32);
  const part = (b) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  return `ssh-ed25519 ${Buffer.concat([part(Buffer.from("ssh-ed25519")), part(raw)]).toString("base64")} ${comment}`;
}

/** Waits until the element with id `id` has the focus. */
const eventuallyFocused = (page, id) => poll(async () => (await page.evaluate(() => document.activeElement && document.activeElement.id)) === id);

const headers = (page, selector) => page.locator(`${selector} thead th`).allTextContents();

const scenarios = {
  async shell() {
    const res = await fetch(`${base}/`);
    const csp = res.headers.get("content-security-policy") || "";
    check("shell: GET / answers HTML", res.status === 200 && (res.headers.get("content-type") || "").startsWith("text/html"), String(res.status));
    check("shell: strict policy (self only, no inline script, no eval)", csp.includes("script-src 'self';") && !csp.includes("unsafe-inline") && !csp.includes("unsafe-eval") && csp.includes("trusted-types 'none'"), csp);
    const html = await res.text();
    check("shell: no inline script", !/<script(?![^>]*\bsrc=)[^>]*>/.test(html), html);
    check("shell: nothing from another origin", !/(src|href)="(https?:)?\/\//.test(html), html);
    const main = html.match(/src="(\/console\/[0-9a-f]{16}\/main\.js)"/);
    check("shell: the entry script has a content-addressed URL", !!main, html);
    if (main) {
      const js = await fetch(base + main[1]);
      check("shell: modules are immutable", (js.headers.get("cache-control") || "").includes("immutable"), js.headers.get("cache-control"));
      check("shell: modules are JavaScript", js.headers.get("content-type") === "application/javascript");
    }
    const other = await fetch(`${base}/console/0000000000000000/main.js`);
    check("shell: another build's file is 404", other.status === 404, String(other.status));

    // First load: every response of the page until the login form shows: the bytes that came
    // over the wire (the service compresses its answers), and every file gzipped here.
    const context = await browser.newContext();
    const page = await context.newPage();
    const requests = [];
    page.on("requestfinished", (r) => requests.push(r));
    await page.goto(`${base}/`);
    await page.getByLabel("Username").waitFor();
    await page.waitForLoadState("networkidle");
    let raw = 0;
    let gzipped = 0;
    let wire = 0;
    for (const r of requests) {
      if (!r.url().startsWith(base)) continue;
      const sizes = await r.sizes();
      wire += sizes.responseBodySize + sizes.responseHeadersSize;
      const body = Buffer.from(await (await fetch(r.url())).arrayBuffer());
      raw += body.length;
      gzipped += gzipSync(body, { level: 9 }).length;
    }
    console.log(`first load: ${requests.length} requests, ${raw} bytes, ${gzipped} bytes gzipped (level 9), ${wire} bytes over the wire with headers`);
    check("shell: first load is at most 150 KB gzipped", gzipped <= 150 * 1024, String(gzipped));
    check("shell: the service sends it compressed", wire <= 150 * 1024, String(wire));
    await context.close();
  },

  async login() {
    await consolePage(
      "login",
      async (page) => {
        await page.goto(`${base}/`);
        await page.getByLabel("Username").waitFor();
        check("login: the form has labelled inputs", (await page.getByLabel("Username").count()) === 1 && (await page.getByLabel("Password", { exact: true }).count()) === 1);
        check("login: the first-run hint is there", (await page.getByText("First start?").count()) === 1);
        await shot(page, "login");
        await page.getByLabel("Username").fill(admin.name);
        await page.getByLabel("Password", { exact: true }).fill("not the password");
        await page.getByRole("button", { name: "Log in" }).click();
        check("login: a wrong password says so", await eventually(page.locator("p.error"), /./), await page.locator("body").textContent());
        await page.getByLabel("Password", { exact: true }).fill(admin.password);
        await page.getByRole("button", { name: "Log in" }).click();
        await page.getByRole("button", { name: "Log out" }).waitFor({ timeout: 10000 });
        check("login: lands on the schema area", page.url().endsWith("#/schema"), page.url());
        await page.goto(`${base}/#/login`);
        check("login: the login address leads a logged-in user home", await eventually(page.locator(".view-head h1"), "Schema"), page.url());
        const stored = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.getItem("hf.console.session") }));
        check("login: the token is in sessionStorage, not localStorage", stored.local === 0 && !!stored.session && stored.session.includes("token"), JSON.stringify(stored));
        await page.reload();
        await page.getByRole("button", { name: "Log out" }).waitFor({ timeout: 10000 });
        check("login: a reload keeps the session", (await page.locator(".who").textContent()).includes(admin.name));
        await page.getByRole("button", { name: "Log out" }).click();
        await page.getByLabel("Username").waitFor();
        check("login: log out forgets the token", (await page.evaluate(() => sessionStorage.getItem("hf.console.session"))) === null);
        check("login: log out says so", (await page.locator(".notice").textContent()) === "You are logged out.");
        // Keyboard only: the username has the focus, Tab moves to the password, Enter logs in.
        await page.reload();
        await page.getByLabel("Username").waitFor();
        check("login: the username has the focus", await eventuallyFocused(page, "login-username"));
        await page.keyboard.type(admin.name);
        await page.keyboard.press("Tab");
        await page.keyboard.type(admin.password);
        await page.keyboard.press("Enter");
        await page.getByRole("button", { name: "Log out" }).waitFor({ timeout: 10000 });
        check("login: works from the keyboard", (await page.locator(".who").textContent()).includes(admin.name));
        await page.keyboard.press("Tab");
        const focused = await page.evaluate(() => {
          const e = document.activeElement;
          return { text: e.textContent, outline: getComputedStyle(e).outlineStyle };
        });
        check("login: the focus is visible", focused.text === "Skip to content" && focused.outline !== "none", JSON.stringify(focused));
      },
      { expectedStatus: [401] },
    );
  },

  async query() {
    await consolePage(
      "query",
      async (page) => {
        await login(page, admin);
        await page.getByRole("link", { name: "Query" }).click();
        const box = page.getByLabel("Query");
        await box.fill("SELECT name, industry FROM crm.account ORDER BY name LIMIT 3");
        await page.getByRole("button", { name: "Run" }).click();
        check("query: the results are a table", await eventually(page.locator("table.records tbody tr td"), "Acme"));
        check("query: its header cells are the field keys", JSON.stringify(await headers(page, "table.records")) === '["name","industry"]', JSON.stringify(await headers(page, "table.records")));
        check("query: rows in order", JSON.stringify(await page.locator("table.records tbody tr td:first-child").allTextContents()) === '["Acme","Globex","Initech"]');
        check("query: empty values are shown as a dash", (await page.locator("table.records td.nil").count()) > 0);
        await shot(page, "query");
        await box.fill("SELECT name, nme\nFROM crm.account");
        await page.getByRole("button", { name: "Run" }).click();
        check("query: an error is shown at its location", await eventually(page.locator(".error-box .where"), "line 1, column 14"), await page.locator(".error-box").textContent().catch(() => ""));
        check("query: the offending name is underlined", (await page.locator(".error-box mark.at").textContent()) === "nme");
        await shot(page, "query-error");
        await box.fill("SELECT COUNT(id) FROM crm.account");
        await box.press("Control+Enter");
        check("query: Ctrl+Enter runs, aggregates are keyed by their text", await eventually(page.locator("table.records thead th"), "count(id)"));
        check("query: numbers are formatted", (await page.locator("table.records td.num").first().textContent()) === "33");
        await page.getByRole("link", { name: "System" }).click();
        await page.getByRole("link", { name: "Query" }).click();
        await eventually(page.locator(".history li").nth(2), /./);
        const recent = await page.locator(".history li").allTextContents();
        check("query: the recent queries stay while the page is open", recent.length === 3 && recent[0] === "SELECT COUNT(id) FROM crm.account", JSON.stringify(recent));
        await page.locator(".history button").nth(2).click();
        check("query: a recent query can be picked", (await box.inputValue()) === "SELECT name, industry FROM crm.account ORDER BY name LIMIT 3");
      },
      { expectedStatus: [400] },
    );
  },

  async data() {
    await consolePage(
      "data",
      async (page) => {
        await login(page, admin);
        await page.getByRole("link", { name: "Data" }).click();
        check("data: says what to do first", await eventually(page.locator(".work .empty"), /Choose an object/));
        await page.locator(".side").getByRole("link", { name: "Account" }).click();
        const table = page.locator("table.records");
        await table.waitFor();
        const keys = await headers(page, "table.records");
        check("data: header cells are the field keys (inherited first)", JSON.stringify(keys) === '["email","name","phone","industry","opportunity_count","pipeline_amount","website","won_amount"]', JSON.stringify(keys));
        check("data: sorted by name, one page of 25", (await table.locator("tbody tr").count()) === 25, String(await table.locator("tbody tr").count()));
        check("data: says how many", await eventually(page.locator("p.meta[role=status]"), /^Records 1–25 of 33 records/), await page.locator("p.meta[role=status]").textContent());
        check("data: decimals are formatted", (await table.locator("tbody tr").first().locator("td").nth(5).textContent()) === "0");
        await shot(page, "data");
        // Another client inserts a record that sorts first while page 1 is on show: the next page
        // (read after page 1's last row, with the query API's cursor) repeats nothing and loses nothing.
        const cells = () => table.locator("tbody tr td button.link").allTextContents();
        const firstPage = await cells();
        const inserted = await call(admin, "POST", "/data/crm/account", { name: "Aardvark" });
        await page.getByRole("button", { name: "Next" }).click();
        check("data: the next page comes from the server", await eventually(page.locator("p.meta[role=status]"), /^Records 26–33 of 34/), await page.locator("p.meta[role=status]").textContent());
        const secondPage = await cells();
        const both = [...firstPage, ...secondPage];
        check("data: an insert before the page shifts no row into it twice", secondPage[0] === "Zeta 22" && new Set(both).size === 33 && both.length === 33, JSON.stringify(both));
        await page.getByRole("button", { name: "Previous" }).click();
        check("data: previous reads the first page again", await eventually(table.locator("tbody tr td button.link").first(), "Aardvark"), JSON.stringify(await cells()));
        await call(admin, "DELETE", `/data/crm/account/${inserted.body.id}`);
        await page.getByRole("button", { name: "Last" }).click();
        check("data: the last page is read from the end", await eventually(page.locator("p.meta[role=status]"), /^Records 9–33 of 33/), await page.locator("p.meta[role=status]").textContent());
        check("data: and keeps the order", (await cells())[24] === "Zeta 29", JSON.stringify(await cells()));
        await page.locator("th button.sort").filter({ hasText: /^name$/ }).click();
        check("data: sorting by the same column again turns it around", await eventually(table.locator("tbody tr td button").first(), "Zeta 29"), await table.locator("tbody tr td").nth(1).textContent());
        await page.getByLabel("Filter").selectOption("name");
        await page.locator("#filter-text").fill("acm");
        await page.locator("#filter-text").press("Enter");
        check("data: the filter runs on the server", await eventually(page.locator("p.meta[role=status]"), /^Records 1–1 of 1 record matching/), await page.locator("p.meta[role=status]").textContent());

        // Keyboard: the editor takes the focus, Escape closes it.
        await page.getByRole("button", { name: "New record" }).click();
        check("data: the editor takes the focus", await eventually(page.locator(".editor h2"), "New account") && (await eventuallyFocused(page, "rec-email")));
        await page.keyboard.press("Escape");
        check("data: Escape closes the editor", await eventuallyCount(page.locator(".editor"), 0));

        // Create, with a rule failing next to its field first.
        await page.getByRole("button", { name: "New record" }).click();
        await page.locator("#rec-name").fill("");
        await page.locator("#rec-website").fill("https://example.com");
        await page.getByRole("button", { name: "Create" }).click();
        check("data: a missing required value is shown next to its input", await eventually(page.locator('.field-error[data-field="name"]'), /./), await page.locator(".editor").textContent());
        check("data: the input is marked invalid", (await page.locator("#rec-name").getAttribute("aria-invalid")) === "true");
        await shot(page, "data-errors");
        await page.locator("#rec-name").fill("Umbrella");
        // The first answer is lost on its way back (the service made the record); creating
        // again sends the same Idempotency-Key and is answered with that record.
        const createKeys = [];
        await page.route("**/data/crm/account", async (route) => {
          if (route.request().method() !== "POST") return route.continue();
          createKeys.push(route.request().headers()["idempotency-key"]);
          if (createKeys.length > 1) return route.continue();
          await route.fetch();
          await route.abort("connectionreset");
        });
        await page.getByRole("button", { name: "Create" }).click();
        check("data: a lost answer is said", await eventually(page.locator(".editor"), /could not be reached/), await page.locator(".editor").textContent());
        await page.getByRole("button", { name: "Create" }).click();
        check("data: creates the record", await eventually(page.locator("p.notice"), "Record created."));
        await page.unroute("**/data/crm/account");
        check("data: both attempts sent one key", createKeys.length === 2 && /^[0-9a-f]{32}$/.test(createKeys[0]) && createKeys[0] === createKeys[1], JSON.stringify(createKeys));
        const umbrellas = (await call(admin, "POST", "/data/query", { query: "SELECT id FROM crm.account WHERE name = 'Umbrella'" })).body.records;
        check("data: one record was made", umbrellas.length === 1, JSON.stringify(umbrellas));

        // Edit with a conflict: someone else changes the record after the editor loaded it.
        await page.locator("#filter-text").fill("Umbrella");
        await page.locator("#filter-text").press("Enter");
        // The previous filter also matched one record: wait for this one's row.
        check("data: filters again", await eventually(table.locator("tbody tr td button").first(), "Umbrella"));
        await table.locator("tbody tr td button").first().click();
        await page.locator("#rec-industry").waitFor();
        const id = (await page.locator(".editor p.code").textContent()).trim();
        const other = await call(admin, "PATCH", `/data/crm/account/${id}`, { industry: "Chemicals" });
        check("data: (someone else saves meanwhile)", other.status === 200, JSON.stringify(other));
        await page.locator("#rec-industry").fill("Pharma");
        await page.getByRole("button", { name: "Save" }).click();
        check("data: a 412 conflict is shown", await eventually(page.locator(".editor .warning strong"), "Someone else changed this record"));
        await shot(page, "data-conflict");
        await page.getByRole("button", { name: "Load the current version" }).click();
        check("data: the current version loads", await eventuallyValue(page.locator("#rec-industry"), "Chemicals"), await page.locator("#rec-industry").inputValue());
        await page.locator("#rec-industry").fill("Pharma");
        await page.getByRole("button", { name: "Save" }).click();
        check("data: then saves", await eventually(page.locator("p.notice"), "Saved."));
        check("data: the table shows the change", await eventually(table.locator("tbody tr td").nth(3), "Pharma", 10000), await page.locator(".work").textContent());
        await table.locator("tbody tr td button").first().click();
        await page.getByRole("button", { name: "Delete…" }).click();
        await page.getByRole("button", { name: "Yes, delete" }).click();
        check("data: deletes after confirmation", await eventually(page.locator("p.notice"), "Record deleted."));

        // A record-level rule and a field rule on opportunities.
        await page.locator(".side").getByRole("link", { name: "Opportunity" }).click();
        await page.getByRole("button", { name: "New record" }).waitFor();
        check("data: an empty object says what to do", await eventually(page.locator(".work p.empty"), /No records yet/));
        await page.getByRole("button", { name: "New record" }).click();
        const acme = (await call(admin, "POST", "/data/query", { query: "SELECT id FROM crm.account WHERE name = 'Acme'" })).body.records[0].id;
        await page.locator("#rec-name").fill("Big deal");
        await page.locator("#rec-account").fill("acm");
        check("data: the lookup picker searches the target object", await eventuallyCount(page.locator("#choices-account option"), 1) && (await page.locator("#choices-account option").getAttribute("value")) === acme, JSON.stringify(await page.locator("#choices-account option").allTextContents()));
        await page.locator("#rec-account").fill(acme);
        await page.locator("#rec-amount").fill("-5");
        await page.getByRole("button", { name: "Create" }).click();
        check("data: RULE_FAILED is shown next to its field", await eventually(page.locator('.field-error[data-field="amount"]'), "The amount cannot be negative."), await page.locator(".editor").textContent());
        await page.locator("#rec-amount").fill("12500.50");
        await page.locator("#rec-stage").fill("won");
        await page.locator("#rec-probability").fill("50");
        await page.getByRole("button", { name: "Create" }).click();
        check("data: creates the opportunity", await eventually(page.locator("p.notice"), "Record created."));
        check("data: formula columns are computed and formatted", await eventually(page.locator("table.records tbody td.num").last(), "6,250.25"), JSON.stringify(await page.locator("table.records tbody td").allTextContents()));
        check("data: a lookup shows the name of its record", (await page.locator("table.records tbody td").first().textContent()).trim() === "Acme", JSON.stringify(await page.locator("table.records tbody td").allTextContents()));
      },
      { expectedStatus: [412, 422], expectedErrors: ["ERR_CONNECTION_RESET"] },
    );
  },

  async schema() {
    await consolePage(
      "schema",
      async (page) => {
        await login(page, admin);
        const boxes = page.locator("svg.diagram .box");
        await boxes.first().waitFor();
        check("schema: the diagram draws every object", (await boxes.count()) === 4, String(await boxes.count()));
        check("schema: and its lookups and inheritance", (await page.locator("svg.diagram .edge.lookup").count()) === 2 && (await page.locator("svg.diagram .edge.extends").count()) === 2, String(await page.locator("svg.diagram .edge").count()));
        await shot(page, "schema");

        // A new branch, an object with every kind of field.
        await page.locator("#new-branch").fill("feature1");
        await page.getByRole("button", { name: "New branch" }).click();
        check("schema: a new branch is created by its first change", await eventually(page.locator("p.notice"), /Branch feature1 does not exist yet/));
        await page.getByRole("button", { name: "New object" }).click();
        await page.getByLabel("Key").fill("invoice");
        await page.getByLabel("Label").fill("Invoice");
        await page.getByRole("button", { name: "Create object" }).click();
        check("schema: creates the object on the branch", await eventually(page.locator("p.notice"), "Object crm.invoice created. Committed to branch feature1."), await page.locator("main").textContent());
        check("schema: and shows it", await eventually(page.locator(".object-title"), /^Invoice/));
        check("schema: the branch exists now", (await page.locator("#branch-select").inputValue()) === "feature1");

        async function addField(key, label, kind, extra) {
          await page.getByRole("button", { name: "Add field" }).click();
          await page.getByLabel("Key").fill(key);
          await page.getByLabel("Label").fill(label);
          await page.getByLabel("Kind").selectOption(kind);
          await extra();
          await page.getByRole("button", { name: "Create field" }).click();
        }
        await addField("total", "Total", "scalar", async () => {
          await page.getByLabel("Type").selectOption("decimal");
          await page.getByLabel("Required").check();
        });
        check("schema: adds a scalar field", await eventually(page.locator("p.notice"), /^Field total created/));
        await addField("doubled", "Doubled", "formula", async () => {
          await page.getByLabel("Type").selectOption("decimal");
          await page.getByLabel("Formula").fill("(total * 2");
          check("schema: an open parenthesis is shown as you type, at its place", await eventually(page.locator('.field-error[data-field="formula"]'), "This `(` is not closed. (line 1, column 1)"), await page.locator(".panel").textContent());
          // Names and types are the service's to check: the same write is sent as a dry run.
          await page.getByLabel("Formula").fill("totl * 2");
          check("schema: an unknown name is found as you type (a dry run of the write), at its place", await eventually(page.locator('.field-error[data-field="formula"]'), /column 1\)/), await page.locator(".panel").textContent());
          check("schema: underlined as you type", await eventually(page.locator(".panel mark.at"), "totl"), await page.locator(".panel").textContent());
          const fields = await call(admin, "GET", "/metadata@feature1/crm/objects/invoice/fields");
          check("schema: the dry run wrote nothing", fields.status === 200 && !fields.body.some((f) => f.fieldKey === "doubled"), JSON.stringify(fields.body));
          await page.getByLabel("Formula").fill("total * 2");
          check("schema: and goes when it is right", await eventuallyCount(page.locator('.field-error[data-field="formula"]'), 0));
          await page.getByLabel("Formula").fill("total *+ 2");
        });
        check("schema: a formula error is shown at its place", await eventually(page.locator('.field-error[data-field="formula"]'), /column/), await page.locator(".panel").textContent());
        check("schema: underlined", (await page.locator(".panel mark.at").count()) === 1);
        await shot(page, "schema-formula-error");
        await page.getByLabel("Formula").fill("total * 2");
        await page.getByRole("button", { name: "Create field" }).click();
        check("schema: the fixed formula is saved", await eventually(page.locator("p.notice"), /^Field doubled created/), await page.locator("main").textContent());
        await addField("account", "Account", "lookup", async () => {
          await page.getByLabel("Target object").selectOption("crm.account");
        });
        check("schema: adds a lookup", await eventually(page.locator("p.notice"), /^Field account created/));
        const kinds = await page.locator("table.fields tbody td:nth-child(3)").allTextContents();
        check("schema: lists the fields with their kinds", JSON.stringify(kinds) === '["lookup","formula","scalar"]', JSON.stringify(kinds));
        await page.locator(".side").getByRole("link", { name: "Account" }).click();
        await eventually(page.locator(".object-title"), /^Account/);
        await addField("invoice_total", "Invoiced", "rollup", async () => {
          await page.getByLabel("Type").selectOption("decimal");
          await page.getByLabel("Function").selectOption("sum");
          await page.getByLabel("Source (module.object.lookupField)").fill("crm.invoice.account");
          await page.getByLabel("Field of the source (not for count)").fill("total");
        });
        check("schema: adds a rollup", await eventually(page.locator("p.notice"), /^Field invoice_total created/), await page.locator("main").textContent());
        await shot(page, "schema-object");

        // Plan and apply the branch.
        await page.getByRole("button", { name: "Plan and apply…" }).click();
        check("schema: the plan lists its statements", await eventually(page.locator(".plan .changes li .code").first(), "crm.invoice"), await page.locator(".plan").textContent());
        check("schema: with their SQL", (await page.locator(".plan pre.sql").first().textContent()).startsWith('CREATE TABLE "crm"."invoice"'));
        await shot(page, "schema-plan");
        // The apply is held back a little, so that its pending state can be seen.
        const slowly = async (route) => {
          await new Promise((r) => setTimeout(r, 700));
          await route.continue();
        };
        await page.route("**/apply", slowly);
        await page.getByRole("button", { name: "Apply feature1" }).click();
        check("schema: shows the apply under way", await eventually(page.locator(".plan p.pending"), /Applying feature1 to the database: \d+ statements in one transaction…$/), await page.locator(".plan").textContent());
        check("schema: applies, and says what it ran", await eventually(page.locator(".plan p.notice"), /^Applied feature1: \d+ statements: 1 table created, \d+ columns added\. It is now the live schema\.$/), await page.locator(".plan").textContent());
        await page.unroute("**/apply", slowly);

        // The live branch: a change that loses data asks first.
        await page.locator("#branch-select").selectOption("main");
        await eventually(page.locator("p.meta"), /This is the live branch/);
        await page.locator(".side").getByRole("link", { name: "Invoice" }).click();
        await eventually(page.locator(".object-title"), /^Invoice/);
        await page.route("**/metadata@main/crm/objects/invoice/fields/note*", slowly);
        await addField("note", "Note", "scalar", async () => {});
        check("schema: a live write shows that it runs", await eventually(page.locator("p.pending"), /Writing the change and applying it to the database…$/), await page.locator("main").textContent());
        check("schema: a live change is applied at once, with what it ran", await eventually(page.locator("p.notice"), /^Field note created\. Applied to the database: \d+ statements?: 0 tables created, 1 column added\.$/), await page.locator("main").textContent());
        await page.unroute("**/metadata@main/crm/objects/invoice/fields/note*", slowly);
        await page.getByRole("button", { name: "Delete field note" }).click();
        check("schema: a destructive change asks first", await eventually(page.locator(".confirm h2"), "This change deletes data"));
        await shot(page, "schema-destructive");
        await page.getByRole("button", { name: "Change it anyway" }).click();
        check("schema: then deletes", await eventually(page.locator("p.notice"), /^Field note deleted/));

        // Edit a field and the object; an object is deleted only after a confirmation.
        await page.getByRole("button", { name: "Edit field doubled" }).click();
        await page.getByLabel("Label").fill("Twice the total");
        await page.getByRole("button", { name: "Save field" }).click();
        check("schema: edits a field", await eventually(page.locator("p.notice"), /^Field doubled saved\. Applied/), await page.locator("main").textContent());
        check("schema: the list shows the new label", (await page.locator("table.fields tbody tr", { hasText: "doubled" }).locator("td").nth(1).textContent()) === "Twice the total");
        await page.getByRole("button", { name: "Edit object" }).click();
        await page.getByLabel("Description").fill("What we bill.");
        await page.getByRole("button", { name: "Save object" }).click();
        check("schema: edits the object", await eventually(page.locator(".object-head p").last(), "What we bill."), await page.locator("main").textContent());
        await page.getByRole("button", { name: "Delete object…" }).click();
        check("schema: deleting an object asks first", await eventually(page.locator(".object-head span").last(), "Delete crm.invoice and its fields?"));
        await page.getByRole("button", { name: "Keep it" }).click();

        // A validation rule: first written wrong, then right.
        await page.getByRole("button", { name: "Add rule" }).click();
        await page.getByLabel("Key").fill("total_positive");
        await page.getByLabel("Must hold").fill("totl > 0");
        check("schema: a rule naming an unknown field is refused as it is typed", await eventually(page.locator('.field-error[data-field="assert"]'), /column 1\)/), await page.locator(".panel").textContent());
        await page.getByLabel("Must hold").fill("total >");
        await page.getByLabel("Message when it fails").fill("The total must be positive.");
        await page.getByLabel("Shown next to field").selectOption("total");
        await page.getByRole("button", { name: "Save rule" }).click();
        check("schema: a rule that does not parse is refused at its place", await eventually(page.locator('.field-error[data-field="assert"]'), /column 8/), await page.locator("main").textContent());
        check("schema: underlined in the rule", (await page.locator(".panel mark.at").count()) === 1);
        await page.getByLabel("Must hold").fill("total > 0");
        await page.getByRole("button", { name: "Save rule" }).click();
        check("schema: saves the rule", await eventually(page.locator("p.notice"), /^Rule total_positive saved\. Applied/), await page.locator("main").textContent());
        check("schema: lists it", await eventually(page.locator(".rules code.assert"), "total > 0"));

        // The new object takes records, its rule holds, and its formula computes.
        await page.goto(`${base}/#/data/crm/invoice`);
        await page.locator(".data-view h1", { hasText: "Invoice" }).waitFor();
        await page.getByRole("button", { name: "New record" }).click();
        await page.locator("#rec-total").fill("-1");
        await page.getByRole("button", { name: "Create" }).click();
        check("schema: the new rule fails next to its field", await eventually(page.locator('.field-error[data-field="total"]'), "The total must be positive."), await page.locator(".editor").textContent());
        await page.locator("#rec-total").fill("10.5");
        await page.getByRole("button", { name: "Create" }).click();
        check("schema: the applied object takes records with formulas", await eventually(page.locator("table.records tbody td.num").first(), "21"), await page.locator("main").textContent());

        // A module of its own, on the live branch.
        await page.goto(`${base}/#/schema/main`);
        await page.getByRole("button", { name: "New module" }).click();
        await page.getByLabel("Key").fill("sales");
        await page.getByLabel("Label").fill("Sales");
        await page.getByRole("button", { name: "Create module" }).click();
        check("schema: creates a module", await eventually(page.locator("p.notice"), /^Module sales created\. Applied/), await page.locator("main").textContent());
        check("schema: lists it, empty", await eventually(page.locator(".side h2", { hasText: "Sales" }), /^Sales/) && (await page.locator(".side li.empty").count()) === 1);
        // A refusal is shown with its code.
        await page.getByRole("button", { name: "New module" }).click();
        await page.getByLabel("Key").fill("sales");
        await page.getByLabel("Label").fill("Sales again");
        await page.getByRole("button", { name: "Create module" }).click();
        check("schema: a refusal names its code", await eventually(page.locator("p.error[role=alert]"), /\(ALREADY_EXISTS\)$/), await page.locator("main").textContent());
      },
      { expectedStatus: [400, 404, 409, 422] },
    );
  },

  async screens() {
    await consolePage(
      "screens",
      async (page) => {
        await login(page, admin);
        await page.getByRole("link", { name: "Screens" }).click();
        check("screens: says what to do", await eventually(page.locator(".work .empty"), /Choose a screen/));
        await page.locator(".side").getByRole("link", { name: /Counter/ }).click();
        const source = page.getByLabel("HFX source");
        check("screens: shows the source", await eventuallyValue(source, "<script>let count = 0;</script>\n<button on:click={() => count += 1}>{count}</button>\n"), await source.inputValue().catch(() => ""));
        check("screens: it compiles", await eventually(page.locator("#compile-status"), "Compiles."));
        const frame = page.frameLocator("iframe");
        await frame.locator("#hf-root[data-hfx-state=mounted]").waitFor({ timeout: 10000 });
        check("screens: the preview runs the screen in the rendering frame", (await frame.locator("button").textContent()) === "0");
        await frame.locator("button").click();
        check("screens: the preview is live", await eventually(frame.locator("button"), "1"));
        await source.fill("<script>let count = 0;</script>\n<button on:click={() => count +* 1}>{count}</button>\n");
        check("screens: a compile error shows as you type, at its place", await eventually(page.locator(".diagnostics .where"), /^line 2, column/), await page.locator("main").textContent());
        check("screens: underlined", (await page.locator(".diagnostics mark.at").count()) >= 1);
        await shot(page, "screens-error");
        // The preview runs the text being edited, sidecar included, before anything is saved.
        await page.locator("details.sidecar summary").click();
        await page.getByLabel("Sidecar (imported as ./sidecar)").fill("export const twice = (x: number): number => x * 2;\n");
        await source.fill('<script>import { twice } from "./sidecar"; let n = 2;</script>\n<button on:click={() => n++}>Twice {twice(n)}</button>\n');
        check("screens: the preview runs the unsaved text with its sidecar", await eventually(frame.locator("button"), "Twice 4", 10000), await frame.locator("#hf-root").textContent().catch(() => ""));
        await frame.locator("button").click();
        check("screens: and it is live", await eventually(frame.locator("button"), "Twice 6"));
        await page.getByLabel("Sidecar (imported as ./sidecar)").fill("");
        await source.fill("<script>let count = 10;</script>\n<button on:click={() => count += 1}>Pressed {count}</button>\n");
        check("screens: the fixed source compiles", await eventually(page.locator("#compile-status"), "Compiles."));
        check("screens: the preview follows the text before it is saved", await eventually(frame.locator("button"), "Pressed 10", 10000), await frame.locator("#hf-root").textContent().catch(() => ""));
        const stored = await call(admin, "GET", "/metadata/crm/screens/counter");
        check("screens: nothing was saved yet", stored.body.hfxSource.includes("count += 1}>{count}"), JSON.stringify(stored.body));
        await page.getByRole("button", { name: "Save" }).click();
        check("screens: saves", await eventually(page.locator("p.notice"), "Saved to the live branch."));
        check("screens: the preview still shows the text", await eventually(frame.locator("button"), "Pressed 10", 10000));
        await shot(page, "screens");
        await page.getByLabel("Key").fill("hello");
        await page.getByRole("button", { name: "Create screen" }).click();
        check("screens: creates a screen from a starter", await eventually(page.locator(".object-title"), /^hello/));
        await page.frameLocator("iframe").locator("#hf-root[data-hfx-state=mounted]").waitFor({ timeout: 10000 });
        check("screens: and previews it", (await page.frameLocator("iframe").locator("button").textContent()) === "Clicked 0 times");
      },
      { expectedStatus: [422] },
    );
  },

  async people() {
    const newcomer = { name: `${user.name}_new`, password: "newcomer-password-1" };
    await consolePage(
      "people",
      async (page) => {
        await login(page, admin);
        await page.getByRole("link", { name: "People" }).click();
        const rows = page.locator("table.principals tbody tr");
        await rows.first().waitFor();
        check("people: lists the principals", (await rows.count()) === 2, String(await rows.count()));
        await page.getByLabel("Name").fill(newcomer.name);
        await page.getByRole("button", { name: "Create principal" }).click();
        check("people: shows the setup token once", await eventually(page.locator("#token-title"), `Setup token for ${newcomer.name}`));
        const token = (await page.locator("#setup-token-value").textContent()).trim();
        check("people: the token is there", token.length > 16, token);
        await shot(page, "people");
        await page.getByRole("button", { name: "Done" }).click();

        // The newcomer chooses a password with the token, on the login page.
        const context = await browser.newContext();
        const other = await context.newPage();
        await other.goto(`${base}/`);
        await other.getByText("First start? Use your setup token").click();
        await other.getByLabel("Setup token").fill(token);
        await other.getByLabel("New password").fill(newcomer.password);
        await other.getByRole("button", { name: "Set password and log in" }).click();
        await other.getByRole("button", { name: "Log out" }).waitFor({ timeout: 10000 });
        check("people: the newcomer logs in with the setup token", (await other.locator(".who").textContent()) === newcomer.name, await other.locator(".who").textContent());
        await other.getByRole("link", { name: "People" }).click();
        check("people: the newcomer is not an administrator: the area says so", await eventually(other.locator(".people-view p.warning"), /Only administrators manage principals/));
        await context.close();

        // SSH keys: a bad one is refused next to its input, a good one listed, then revoked.
        await page.getByRole("button", { name: `Credentials of ${newcomer.name}` }).click();
        check("people: the newcomer has a password", await eventually(page.locator(".credentials .pill").first(), "password"));
        await page.getByLabel("SSH public key").fill("ssh-ed25519 not-a-key");
        await page.getByRole("button", { name: "Add SSH key" }).click();
        check("people: a bad key is refused next to its input", await eventually(page.locator("#ssh-key + .field-error"), /./), await page.locator(".credentials").textContent());
        await page.getByLabel("SSH public key").fill(sshKey("laptop"));
        await page.getByRole("button", { name: "Add SSH key" }).click();
        check("people: a key is added", await eventually(page.locator(".credentials li .pill").nth(1), "ssh"));
        await page.getByRole("button", { name: "Revoke key laptop" }).click();
        check("people: and revoked", await eventually(page.locator(".credentials li .pill").last(), "password"));

        // Admin flag, setup token, delete.
        const row = rows.filter({ hasText: newcomer.name });
        await row.getByRole("checkbox").check();
        check("people: makes an administrator", await eventually(page.locator("table.principals tbody tr", { hasText: newcomer.name }).locator("td").first(), newcomer.name) && (await poll(async () => (await call(admin, "GET", "/iam/principals")).body.some((p) => p.pgRole === newcomer.name && p.isAdmin))));
        await page.getByRole("button", { name: `New setup token for ${newcomer.name}` }).click();
        check("people: issues a new setup token", await eventually(page.locator("#token-title"), `Setup token for ${newcomer.name}`));
        await page.getByRole("button", { name: `Delete ${newcomer.name}` }).click();
        await page.getByRole("button", { name: `Delete ${newcomer.name}` }).click();
        check("people: deletes after confirmation", await eventuallyCount(rows, 2), String(await rows.count()));

        // One's own password (set to the same value, so the other scenarios still log in).
        await page.getByLabel("New password").fill("short");
        await page.getByRole("button", { name: "Change password" }).click();
        check("people: a weak password is refused next to its input", await eventually(page.locator("#new-password ~ .field-error"), /./), await page.locator("main").textContent());
        await page.getByLabel("New password").fill(admin.password);
        await page.getByRole("button", { name: "Change password" }).click();
        check("people: changes one's own password", await eventually(page.locator("p.notice"), "Your password is changed."));
      },
      { expectedStatus: [422] },
    );
  },

  async nonadmin() {
    if (!user.name) return;
    await consolePage(
      "nonadmin",
      async (page) => {
        await login(page, user);
        check("nonadmin: no admin badge", (await page.locator(".who .badge").count()) === 0);
        await page.goto(`${base}/#/schema`);
        check("nonadmin: the schema is readable and says who may change it", await eventually(page.locator(".schema-view p.warning"), /Only administrators change it/));
        check("nonadmin: no write controls", (await page.getByRole("button", { name: "Plan and apply…" }).count()) === 0 && (await page.getByRole("button", { name: "New object" }).count()) === 0);
        check("nonadmin: the diagram shows", (await page.locator("svg.diagram .box").count()) >= 4);
        await page.getByRole("link", { name: "People" }).click();
        check("nonadmin: principals are refused politely", await eventually(page.locator(".people-view p.warning"), /Only administrators manage principals/));
        check("nonadmin: own credentials are shown", await eventually(page.locator(".credentials .pill").first(), "password"));
        await shot(page, "nonadmin-people");
        await page.getByRole("link", { name: "Data" }).click();
        await page.locator(".side").getByRole("link", { name: "Account" }).click();
        check("nonadmin: data follows the database grants", await eventually(page.locator("p.meta[role=status]"), /^Records 1–25/));
        await page.getByRole("link", { name: "Screens" }).click();
        await page.locator(".side").getByRole("link", { name: /Counter/ }).click();
        check("nonadmin: screens are read-only", await eventually(page.locator(".screen-editor p.meta").last(), "Only administrators change screens."));
        await page.getByRole("link", { name: "System" }).click();
        check("nonadmin: system status works", await eventually(page.locator("#sys-service + dl .pill").first(), "ok"));

        // The principal is deleted while the console is open: its token stops working, and the
        // console returns to the login form instead of breaking.
        const principals = (await call(admin, "GET", "/iam/principals")).body;
        const me = principals.find((p) => p.pgRole === user.name);
        check("nonadmin: (an administrator deletes the principal)", (await call(admin, "DELETE", `/iam/principals/${me.id}`)).status === 204);
        await page.getByRole("link", { name: "Schema" }).click();
        check("nonadmin: a refused token ends the session", await eventually(page.locator(".login .notice"), "Your session has ended. Please log in again."));
        check("nonadmin: and forgets it", (await page.evaluate(() => sessionStorage.getItem("hf.console.session"))) === null);
      },
      { expectedStatus: [401, 403] },
    );
  },

  async timings() {
    await consolePage("timings", async (page) => {
      await login(page, admin);
      // Each area, opened from another one: the time until its content is on the page.
      const views = [
        ["schema", "#/schema", "svg.diagram .box"],
        ["data", "#/data/crm/account", "table.records tbody tr"],
        ["query", "#/query", "#query-text"],
        ["screens", "#/screens", ".screens-view .side a"],
        ["people", "#/people", "table.principals tbody tr"],
        ["system", "#/system", "#sys-db"],
      ];
      for (const [name, hash, selector] of views) {
        await page.goto(`${base}/#/nowhere`);
        await page.locator("h1", { hasText: "Nothing here" }).waitFor();
        const started = Date.now();
        await page.goto(`${base}/${hash}`);
        await page.locator(selector).first().waitFor();
        console.log(`view ${name}: content shown ${Date.now() - started} ms after navigation`);
      }
      // 100,000 contacts: every page comes from the server. A step is done when the status line
      // names the new range without "loading…" and the first row is the one expected.
      const status = page.locator("p.meta[role=status]");
      const firstName = page.locator("table.records tbody tr td button").first();
      const started = Date.now();
      await page.goto(`${base}/#/data/crm/contact`);
      check("timings: 100,000 records page", (await eventually(status, /^Records 1–25 of 100,000 records$/, 20000)) && (await eventually(firstName, "Contact 000001")), await status.textContent());
      console.log(`100k: first page shown ${Date.now() - started} ms after navigation`);
      for (const [label, act, range, first] of [
        ["next page", () => page.getByRole("button", { name: "Next" }).click(), /^Records 26–50 of 100,000 records$/, "Contact 000026"],
        ["last page", () => page.getByRole("button", { name: "Last" }).click(), /^Records 99,976–100,000 of 100,000 records$/, "Contact 099976"],
        ["sort by name, descending", () => page.locator("th button.sort").filter({ hasText: /^name$/ }).click(), /^Records 1–25 of 100,000 records$/, "Contact 100000"],
      ]) {
        const t = Date.now();
        await act();
        const shown = (await eventually(firstName, first, 20000)) && (await eventually(status, range, 20000));
        check(`timings: 100k ${label}`, shown, `${await status.textContent()} / ${await firstName.textContent()}`);
        console.log(`100k: ${label} shown ${Date.now() - t} ms after the click`);
      }
      check("timings: the table holds one page only", (await page.locator("table.records tbody tr").count()) === 25);
      await shot(page, "data-100k");
    });
  },

  async system() {
    await consolePage("system", async (page) => {
      await login(page, admin);
      await page.goto(`${base}/#/system`);
      check("system: shows the database", await eventually(page.locator("#sys-db + dl dd").first(), /^hf_test/), await page.locator("main").textContent());
      check("system: health ok", (await page.locator("#sys-service + dl .pill").first().textContent()) === "ok");
      check("system: in sync", (await page.locator("#sys-drift ~ p .pill").textContent()) === "in sync");
      check("system: lists the branches", (await page.locator("#sys-drift ~ table tbody td").allTextContents()).includes("main"));
      await shot(page, "system");
    });
  },

  async narrow() {
    await consolePage(
      "narrow",
      async (page) => {
        await login(page, admin);
        await page.goto(`${base}/#/query`);
        await page.getByLabel("Query").waitFor();
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        check("narrow: no horizontal scrolling at 400 px", width <= 400, String(width));
        await shot(page, "narrow");
        // Wide content (records, the diagram, the plan) scrolls inside its own box, not the page.
        for (const [hash, ready] of [["#/data/crm/account", "table.records tbody tr"], ["#/schema/main", "svg.diagram .box"], ["#/people", "table.principals tbody tr"]]) {
          await page.goto(`${base}/${hash}`);
          await page.locator(ready).first().waitFor();
          const wide = await page.evaluate(() => document.documentElement.scrollWidth);
          check(`narrow: ${hash} fits 400 px`, wide <= 400, String(wide));
        }
        await shot(page, "narrow-data");
      },
      { viewport: { width: 400, height: 760 } },
    );
  },

  // Last: it adds an object to the live branch, which the scenarios above do not expect.
  async editing() {
    await consolePage("editing", async (page) => {
      // Values an input shows less exactly than they are stored: a save that changes one field
      // must leave every other one as it was.
      const field = (key, type, extra = {}) => call(admin, "POST", `/metadata@main/crm/objects/ticket/fields/${key}`, { label: key, fieldKind: "scalar", fieldType: type, ...extra });
      await call(admin, "POST", "/metadata@main/crm/objects/ticket", { label: "Ticket" });
      const choices = [{ key: "hot", label: "Hot" }, { key: "vip", label: "VIP" }, { key: "cold", label: "Cold" }];
      for (const [key, type, extra] of [["code", "text"], ["big", "integer"], ["when_at", "datetime"], ["flag", "boolean"], ["meta", "json"], ["ratio", "float"], ["status", "picklist", { values: choices }], ["tags", "multipicklist", { values: choices }]]) {
        const made = await field(key, type, extra);
        check(`editing: field ${key} made`, made.status === 201, JSON.stringify(made.body));
      }
      const raw = '{"code":"EDGE","big":9007199254740993,"when_at":"2024-05-06T07:08:09.123456Z","flag":null,"meta":{"n":12345678901234567890},"ratio":0.1,"status":"hot","tags":["hot","vip"]}';
      const created = await fetch(`${base}/data/crm/ticket`, { method: "POST", headers: { authorization: `Bearer ${await tokenOf(admin)}`, "content-type": "application/json" }, body: raw });
      const id = (await created.json()).id;
      const stored = async () => (await fetch(`${base}/data/crm/ticket/${id}`, { headers: { authorization: `Bearer ${await tokenOf(admin)}` } })).text();
      const before = await stored();
      await login(page, admin);
      await page.goto(`${base}/#/data/crm/ticket`);
      await page.locator("table.records tbody tr td button.link").first().click();
      await page.locator("#rec-ratio").waitFor();
      check("editing: a picklist is a choice of its values", (await page.locator("select#rec-status option").allTextContents()).join("|") === "—|Hot|VIP|Cold");
      check("editing: a multi-select shows its keys", (await page.locator("#rec-tags").inputValue()) === "hot, vip", await page.locator("#rec-tags").inputValue());
      const patches = [];
      page.on("request", (request) => {
        if (request.method() === "PATCH") patches.push(request.postData());
      });
      await page.locator("#rec-ratio").fill("0.2");
      await page.getByRole("button", { name: "Save" }).click();
      check("editing: saves", await eventually(page.locator("p.notice"), "Saved."));
      check("editing: only the changed field is sent", patches.length === 1 && patches[0] === '{"ratio":0.2}', JSON.stringify(patches));
      const after = await stored();
      const unchanged = (text) => text.replace(/"ratio":[^,}]*/, "").replace(/"updatedAt":"[^"]*"/, "");
      check("editing: every other value is exactly as stored", unchanged(after) === unchanged(before), `${before}\n${after}`);
      await page.locator("table.records tbody tr td button.link").first().click();
      await page.locator("#rec-tags").waitFor();
      await page.locator("#rec-tags").fill("cold, hot");
      await page.locator("select#rec-status").selectOption("vip");
      await page.getByRole("button", { name: "Save" }).click();
      check("editing: a multi-select and a picklist save", await eventually(page.locator("p.notice"), "Saved."), await page.locator("main").textContent());
      const saved = JSON.parse(await stored());
      check("editing: as a list of keys (in the choices' order) and a key", JSON.stringify(saved.tags) === '["hot","cold"]' && saved.status === "vip", JSON.stringify(saved));
      await shot(page, "editing");

      // The filter finds `%` and `_` as themselves, and says what a number filter needs.
      await page.getByLabel("Filter").selectOption("code");
      await page.locator("#filter-text").fill("_");
      await page.locator("#filter-text").press("Enter");
      check("editing: _ in a text filter is an underscore, not any character", await eventually(page.locator("p.meta[role=status]"), /^No records matching the filter/), await page.locator("main").textContent());
      await page.locator("#filter-text").fill("DG");
      await page.locator("#filter-text").press("Enter");
      check("editing: and text is found inside the value", await eventually(page.locator("p.meta[role=status]"), /^Records 1–1 of 1 record matching/), await page.locator("main").textContent());
      await page.getByLabel("Filter").selectOption("big");
      await page.locator("#filter-text").fill("abc");
      await page.locator("#filter-text").press("Enter");
      check("editing: a number filter says what it needs", await eventually(page.locator("p.error[role=alert]"), "Enter a whole number to filter big by."), await page.locator("main").textContent());
      // A lookup is filtered by the name of the record it points to.
      const owner = await call(admin, "POST", "/data/crm/account", { name: "Filterable Owner" });
      await call(admin, "POST", "/data/crm/contact", { name: "Filtered Contact", account: owner.body.id });
      await page.goto(`${base}/#/data/crm/contact`);
      await page.getByLabel("Filter").selectOption("account");
      await page.locator("#filter-text").fill("filterable");
      await page.locator("#filter-text").press("Enter");
      check("editing: a lookup filters by its target's name", await eventually(page.locator("table.records tbody tr td button.link"), "Filtered Contact"), await page.locator("main").textContent());
      // An abstract object's records are shown, not saved through it (the service refuses that).
      await page.goto(`${base}/#/data/crm/party`);
      await page.locator("table.records tbody tr td button.link").first().click();
      check("editing: an abstract object's record opens without Save or Delete", await eventually(page.locator(".editor p.meta").last(), /is abstract/) && (await page.getByRole("button", { name: "Save" }).count()) === 0 && (await page.getByRole("button", { name: "Delete…" }).count()) === 0, await page.locator(".editor").textContent());
      await page.getByRole("button", { name: "Close" }).click();

      // The Schema area edits a picklist's choices, keeps them when something else changes, and
      // shows a problem with them beside them.
      await page.goto(`${base}/#/schema/main`);
      await page.locator(".side").getByRole("link", { name: "Ticket" }).click();
      await page.getByRole("button", { name: "Edit field status" }).click();
      check("editing: a picklist's choices are shown one per line", (await page.locator("#field-choices").inputValue()) === "hot: Hot\nvip: VIP\ncold: Cold", await page.locator("#field-choices").inputValue());
      await page.getByLabel("Label").fill("State");
      await page.getByRole("button", { name: "Save field" }).click();
      check("editing: a picklist saves with its choices kept", await eventually(page.locator("p.notice"), /^Field status saved/), await page.locator("main").textContent());
      await page.getByRole("button", { name: "Edit field status" }).click();
      await page.locator("#field-choices").fill("hot: Hot\nvip: VIP\ncold: Cold\nhot: Again");
      await page.getByRole("button", { name: "Save field" }).click();
      check("editing: a repeated key is shown beside the choices", await eventually(page.locator('.field-error[data-field="values"]'), /hot/), await page.locator(".panel").textContent());
      await page.locator("#field-choices").fill("hot: Hot\nvip: VIP\ncold: Cold\nlater: Later");
      await page.getByRole("button", { name: "Save field" }).click();
      check("editing: a choice is added", await eventually(page.locator("p.notice"), /^Field status saved/), await page.locator("main").textContent());
      const status = (await call(admin, "GET", "/metadata/crm/objects/ticket/fields/status")).body;
      check("editing: as the service keeps it", status.label === "State" && JSON.stringify(status.values.map((v) => v.key)) === '["hot","vip","cold","later"]', JSON.stringify(status));
      await page.getByRole("button", { name: "Add field" }).click();
      await page.getByLabel("Key").fill("priority");
      await page.getByLabel("Label").fill("Priority");
      await page.getByLabel("Type").selectOption("picklist");
      await page.locator("#field-choices").fill("low\nhigh: High");
      await page.getByRole("button", { name: "Create field" }).click();
      check("editing: a picklist field is created", await eventually(page.locator("p.notice"), /^Field priority created/), await page.locator("main").textContent());
      const priority = (await call(admin, "GET", "/metadata/crm/objects/ticket/fields/priority")).body;
      check("editing: with its choices", JSON.stringify(priority.values) === '[{"key":"low","label":"low"},{"key":"high","label":"High"}]', JSON.stringify(priority));
      // A default value the form does not show is kept while it fits, and dropped when the type changes.
      await call(admin, "PUT", "/metadata@main/crm/objects/ticket/fields/priority", { label: "Priority", fieldKind: "scalar", fieldType: "picklist", values: priority.values, defaultValue: "high" });
      await page.reload();
      await page.getByRole("button", { name: "Edit field priority" }).click();
      await page.getByLabel("Label").fill("Urgency");
      await page.getByRole("button", { name: "Save field" }).click();
      check("editing: a label change saves", await eventually(page.locator("p.notice"), /^Field priority saved/), await page.locator("main").textContent());
      const kept = (await call(admin, "GET", "/metadata/crm/objects/ticket/fields/priority")).body;
      check("editing: and keeps the default", kept.defaultValue === "high" && kept.label === "Urgency", JSON.stringify(kept));
      await page.getByRole("button", { name: "Edit field priority" }).click();
      await page.getByLabel("Type").selectOption("text");
      await page.getByRole("button", { name: "Save field" }).click();
      check("editing: a picklist with a default becomes text", await eventually(page.locator("p.notice"), /^Field priority saved/), await page.locator("main").textContent());
    }, { expectedStatus: [422] });
  },
};

await runScenarios(browser, scenarios, wanted);
