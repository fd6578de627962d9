// The reference side of the compile benchmark: Svelte 5's `compile` on `AccountList.svelte` (the
// Svelte original of fixtures/hfx/ok/account_list.hfx) and @swc/core's `transformSync` on its
// sidecar (fixtures/hfx/ok/account_list.ts), warm and in-process: 50 warm-up runs, then the median
// of 500. Run it right after `cargo bench -p hf-hfx --bench compile` (see README.md).
import { readFileSync } from "node:fs";
import { transformSync } from "@swc/core";
import { compile } from "svelte/compiler";

const here = new URL(".", import.meta.url);
const screen = readFileSync(new URL("AccountList.svelte", here), "utf8");
const sidecar = readFileSync(new URL("../../../../fixtures/hfx/ok/account_list.ts", here), "utf8");

/** Median and mean in µs (criterion's figure is a mean; garbage collection makes them differ). */
function time(run, warm = 50, runs = 500) {
  for (let i = 0; i < warm; i++) run();
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    run();
    times.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  times.sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  return `median ${times[times.length >> 1].toFixed(1)} µs, mean ${mean.toFixed(1)} µs`;
}

// The screen with its markup repeated ten times (script and style once), as the Rust bench does.
const start = screen.indexOf("<section");
const end = screen.indexOf("<style>");
const tenfold = screen.slice(0, start) + screen.slice(start, end).repeat(10) + screen.slice(end);

console.log(`svelte 5 compile (AccountList.svelte): ${time(() => compile(screen, { generate: "client" }))}`);
console.log(`svelte 5 compile (markup x10, ${tenfold.split("\n").length} lines): ${time(() => compile(tenfold, { generate: "client" }), 10, 100)}`);
console.log(`@swc/core transformSync (sidecar):     ${time(() => transformSync(sidecar, { jsc: { parser: { syntax: "typescript" }, target: "esnext" } }))}`);
