// The README's quick start, through a client generated from hf's /openapi.json: openapi-typescript
// turns the document into `paths`, openapi-fetch makes the calls. `tsc` type-checks this file
// against the generated types, so a path, parameter or body the document gets wrong fails the
// build; running it against the real server checks the answers.
//
// Environment: HF_URL (the server), HF_NAME and HF_SETUP_TOKEN (a principal's setup token).
import createClient from "openapi-fetch";
import type { paths } from "../generated/hf.js";

const baseUrl = required("HF_URL");
const username = required("HF_NAME");
const setupToken = required("HF_SETUP_TOKEN");
const password = "correct horse battery staple";

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** The data of a successful call; anything else stops the run with the answer's envelope. */
function ok<T>(what: string, result: { data?: T; error?: unknown; response: Response }): T {
  if (result.data === undefined || !result.response.ok) {
    throw new Error(`${what}: ${result.response.status} ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

const anonymous = createClient<paths>({ baseUrl });

// 1. Set the password with the setup token, then log in with it.
ok("set-password", await anonymous.POST("/auth/set-password", { body: { setupToken, password } }));
const login = ok("login", await anonymous.POST("/auth/login", { body: { username, password } }));
const hf = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${login.token}` } });

// 2. A module, an object and a field on the live branch: each write applies its DDL.
const branch = "main";
ok(
  "create module",
  await hf.POST("/metadata@{branch}/{moduleKey}", {
    params: { path: { branch, moduleKey: "shop" } },
    body: { label: "Shop" },
  }),
);
ok(
  "create object",
  await hf.POST("/metadata@{branch}/{moduleKey}/objects/{objectKey}", {
    params: { path: { branch, moduleKey: "shop", objectKey: "product" } },
    body: { label: "Product" },
  }),
);
const field = ok(
  "create field",
  await hf.POST("/metadata@{branch}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}", {
    params: { path: { branch, moduleKey: "shop", objectKey: "product", fieldKey: "name" } },
    body: { fieldKind: "scalar", label: "Name", fieldType: "text", required: true },
  }),
);
const read = ok(
  "read field",
  await hf.GET("/metadata/{moduleKey}/objects/{objectKey}/fields/{fieldKey}", {
    params: { path: { moduleKey: "shop", objectKey: "product", fieldKey: "name" } },
  }),
);

// 3. A record: created, then read back by its id.
const created = ok(
  "create record",
  await hf.POST("/data/{moduleKey}/{objectKey}", {
    params: { path: { moduleKey: "shop", objectKey: "product" } },
    body: { name: "Widget" },
  }),
);
const id = String(created["id"]);
const record = ok(
  "read record",
  await hf.GET("/data/{moduleKey}/{objectKey}/{idOrFieldKey}", {
    params: { path: { moduleKey: "shop", objectKey: "product", idOrFieldKey: id } },
  }),
);

// 4. A query.
const query = ok(
  "query",
  await hf.POST("/data/query", {
    body: { query: "SELECT name FROM shop.product WHERE name = :name", params: { name: "Widget" } },
  }),
);

console.log(
  JSON.stringify({
    apply: field.apply,
    fieldType: read.fieldType,
    record: record["name"],
    records: query.records,
  }),
);
