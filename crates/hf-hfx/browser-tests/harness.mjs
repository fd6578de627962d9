// What every browser run of hf shares: starting headless Chromium, counting checks, watching a
// page for console errors, polling until something shows, running named scenarios and exiting
// with the outcome. Used by this directory's `run.mjs` (compiled screens against a fake API) and
// by `crates/hf-tests/browser/{run,console}.mjs` (the real server).
//
// It imports nothing: each caller passes its own `chromium` from `playwright-core`, which node
// resolves from the caller's `node_modules`, so either directory works with its own `npm ci`.
//
// Waiting is done by polling through locators, never `page.waitForFunction`: that evaluates a
// string in the page, which the rendering frame's and the console's Content-Security-Policy
// (rightly) forbid.

/** Headless Chromium at `CHROMIUM` (default `/usr/bin/chromium`). */
export function launch(chromium) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

const tally = { passed: 0, failures: 0 };

/** Records one check and prints `ok   name` or `FAIL name detail`. */
export function check(name, ok, detail = "") {
  if (ok) {
    tally.passed++;
    console.log(`ok   ${name}`);
  } else {
    tally.failures++;
    console.log(`FAIL ${name} ${detail}`);
  }
}

/**
 * Collects what goes wrong on `page`: console errors and warnings, page errors and dialogs.
 * Chromium logs every non-2xx response as an error; statuses the scenario provokes on purpose
 * (`expectedStatus`) and messages it expects (`expectedErrors`, substrings) are not problems.
 * Returns the array the problems are added to.
 */
export function watch(page, { expectedStatus = [], expectedErrors = [] } = {}) {
  const problems = [];
  page.on("console", (m) => {
    const text = m.text();
    const expected = expectedStatus.some((s) => text.includes(`status of ${s} `)) || expectedErrors.some((e) => text.includes(e));
    if ((m.type() === "error" || m.type() === "warning") && !expected) problems.push(`console ${m.type()}: ${text}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("dialog", (d) => {
    problems.push(`dialog opened: ${d.message()}`);
    d.dismiss();
  });
  return problems;
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Calls `probe` (async) every 50 ms until it answers something truthy; false after `timeout` ms. */
export async function poll(probe, timeout = 10000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    if (await Promise.resolve().then(probe).catch(() => false)) return true;
    await pause(50);
  }
  return false;
}

/** Waits until the first element of `locator` has the text `want` (a string or a pattern). */
export function eventually(locator, want, timeout = 10000) {
  return poll(async () => {
    const found = await locator.first().textContent({ timeout: 1000 }).catch(() => null);
    return found !== null && (want instanceof RegExp ? want.test(found) : found === want);
  }, timeout);
}

/** Waits until the input `locator` holds `want`. */
export function eventuallyValue(locator, want) {
  return poll(async () => (await locator.inputValue().catch(() => null)) === want);
}

/** Waits until `locator` matches `want` elements. */
export function eventuallyCount(locator, want) {
  return poll(async () => (await locator.count()) === want);
}

/** Waits until `predicate(arg)`, evaluated in the page (a function, not a string), is truthy. */
export function until(page, predicate, arg) {
  return poll(() => page.evaluate(predicate, arg));
}

/** The text of the first element that matches `selector`. */
export const text = (page, selector) => page.locator(selector).first().textContent();

/**
 * Runs the scenarios named on the command line (`wanted`), or all of them, then closes the
 * browser, prints the tally and exits with 1 when a check failed.
 */
export async function runScenarios(browser, scenarios, wanted = []) {
  for (const name of wanted.length ? wanted : Object.keys(scenarios)) {
    if (!scenarios[name]) {
      check(`scenario ${name} exists`, false);
      continue;
    }
    await scenarios[name]();
  }
  await finish(browser);
}

/** Closes the browser, prints the tally and exits (1 when a check failed). */
export async function finish(browser) {
  await browser.close();
  console.log(`${tally.passed} passed, ${tally.failures} failed`);
  process.exit(tally.failures === 0 ? 0 : 1);
}
