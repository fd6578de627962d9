// End-to-end checks of the hf console (the HFX application at `/`) in headless Chromium, through
// the real server: a user logs in with the form, moves through the areas and uses them.
//
// Usage: HF_ADMIN_NAME=… HF_ADMIN_PASSWORD=… [HF_USER_NAME=… HF_USER_PASSWORD=…]
//        [HF_SCREENSHOTS=<dir>] node console.mjs <base-url> [scenario ...]
// Run by the Rust test `console::the_console_works_in_chromium`, which starts the server with the
// demo CRM and some records. Prints one line per check, a screenshot of every view into
// HF_SCREENSHOTS, the first load's size, and exits non-zero when a check fails.
import { chromium } from "playwright-core";
import { gzipSync } from "node:zlib";
import { mkdirSync } from "node:fs";

const [base, ...wanted] = process.argv.slice(2);
const admin = { name: process.env.HF_ADMIN_NAME, password: process.env.HF_ADMIN_PASSWORD };
const user = { name: process.env.HF_USER_NAME, password: process.env.HF_USER_PASSWORD };
const shots = process.env.HF_SCREENSHOTS || "";
if (!base || !admin.name || !admin.password) {
  console.error("usage: HF_ADMIN_NAME=… HF_ADMIN_PASSWORD=… node console.mjs <base-url> [scenario ...]");
  process.exit(2);
}
if (shots) mkdirSync(shots, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

let failures = 0;
let passed = 0;

function check(name, ok, detail = "") {
  if (ok) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failures++;
    console.log(`FAIL ${name} ${detail}`);
  }
}

async function shot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
}

/**
 * Opens the console in a fresh browser context (its own sessionStorage) at 1280×800, runs `body`,
 * and checks that no console error, page error or dialog happened. Chromium logs every non-2xx
 * response as an error; statuses the scenario provokes on purpose are listed in `expectedStatus`.
 */
async function consolePage(name, body, { expectedStatus = [], viewport = { width: 1280, height: 800 } } = {}) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (m) => {
    const expected = expectedStatus.some((s) => m.text().includes(`status of ${s} `));
    if ((m.type() === "error" || m.type() === "warning") && !expected) problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("dialog", (d) => {
    problems.push(`dialog opened: ${d.message()}`);
    d.dismiss();
  });
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

/** Waits until `locator` has exactly the text `want` (5 s at most). */
async function eventually(locator, want, timeout = 5000) {
  const deadline = Date.now() + timeout;
  let found = null;
  while (Date.now() < deadline) {
    found = await locator.first().textContent({ timeout: 1000 }).catch(() => null);
    if (found !== null && (want instanceof RegExp ? want.test(found) : found === want)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

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

    // First load: every response of the page until the login form shows, gzipped.
    const context = await browser.newContext();
    const page = await context.newPage();
    const urls = new Set();
    page.on("response", (r) => urls.add(r.url()));
    await page.goto(`${base}/`);
    await page.getByLabel("Username").waitFor();
    let raw = 0;
    let gzipped = 0;
    for (const url of urls) {
      if (!url.startsWith(base)) continue;
      const body = Buffer.from(await (await fetch(url)).arrayBuffer());
      raw += body.length;
      gzipped += gzipSync(body, { level: 9 }).length;
    }
    console.log(`first load: ${urls.size} files, ${raw} bytes, ${gzipped} bytes gzipped`);
    check("shell: first load is at most 150 KB gzipped", gzipped <= 150 * 1024, String(gzipped));
    await context.close();
  },

  async login() {
    await consolePage(
      "login",
      async (page) => {
        await page.goto(`${base}/`);
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
        const stored = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.getItem("hf.console.session") }));
        check("login: the token is in sessionStorage, not localStorage", stored.local === 0 && !!stored.session && stored.session.includes("token"), JSON.stringify(stored));
        await page.reload();
        await page.getByRole("button", { name: "Log out" }).waitFor({ timeout: 10000 });
        check("login: a reload keeps the session", (await page.locator(".who").textContent()).includes(admin.name));
        await page.getByRole("button", { name: "Log out" }).click();
        await page.getByLabel("Username").waitFor();
        check("login: log out forgets the token", (await page.evaluate(() => sessionStorage.getItem("hf.console.session"))) === null);
        check("login: log out says so", (await page.locator(".notice").textContent()) === "You are logged out.");
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
        await box.fill("SELECT name, industry FROM crm.account ORDER BY name");
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
        check("query: numbers are formatted", (await page.locator("table.records td.num").first().textContent()) === "3");
        await page.getByRole("link", { name: "System" }).click();
        await page.getByRole("link", { name: "Query" }).click();
        const recent = await page.locator(".history li").allTextContents();
        check("query: the recent queries stay while the page is open", recent.length === 3 && recent[0] === "SELECT COUNT(id) FROM crm.account", JSON.stringify(recent));
        await page.locator(".history button").nth(2).click();
        check("query: a recent query can be picked", (await box.inputValue()) === "SELECT name, industry FROM crm.account ORDER BY name");
      },
      { expectedStatus: [400] },
    );
  },

  async system() {
    await consolePage("system", async (page) => {
      await login(page, admin);
      await page.goto(`${base}/#/system`);
      check("system: shows the database", await eventually(page.locator("#sys-db + dl dd").first(), /^hf_test/), await page.locator("main").textContent());
      check("system: health ok", (await page.locator("#sys-service + dl .pill").first().textContent()) === "ok");
      check("system: in sync", (await page.locator("#sys-drift ~ p .pill").textContent()) === "in sync");
      check("system: lists the branches", (await page.locator("#sys-drift ~ table tbody td").first().textContent()) === "main");
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
      },
      { viewport: { width: 400, height: 760 } },
    );
  },
};

for (const name of wanted.length ? wanted : Object.keys(scenarios)) {
  if (!scenarios[name]) {
    check(`unknown scenario ${name}`, false);
    continue;
  }
  await scenarios[name]();
}
await browser.close();
console.log(`${passed} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
