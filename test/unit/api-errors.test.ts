// The error catalogue (api/orchestrator-errors.ts, decision 0057): the one list of codes the
// Orchestrator's API answers. The codes the source names at its throw sites and the list agree both
// ways, the OpenAPI document names each code only on an answer of its status, and an unknown code
// does not compile.
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { ERRORS, ERROR_CODES, HttpError, isErrorCode, type ErrorCode } from "../../api/orchestrator-errors";
import { openApiDocument } from "../../orchestrator/http/openapi-document";
import { RELAYED } from "../../orchestrator/agents/turns";

const ROOT = join(__dirname, "..", "..");

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

const SOURCES = tsFiles(join(ROOT, "orchestrator")).map((file) => ({
  file: relative(ROOT, file),
  text: readFileSync(file, "utf8"),
}));

/** Each place the Orchestrator's source names an error code: a thrown HttpError, an answer of the
 * router's `fail`, a pick's refusal (turn-ledger.ts PickRefusal). */
const SITES = [/new HttpError\(\s*"([^"]*)"/g, /\bfail\(\s*res,\s*"([^"]*)"/g, /\{\s*code: "([^"]*)",\s*message:/g];

function namedCodes(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const { file, text } of SOURCES)
    for (const site of SITES) for (const m of text.matchAll(site)) out.set(m[1], [...(out.get(m[1]) ?? []), file]);
  return out;
}

describe("the error catalogue", () => {
  const named = namedCodes();

  it("finds the throw sites it scans (the scan itself works)", () => {
    expect(named.get("fence_refused")).toEqual([
      "orchestrator/workspaces/registry.ts",
      "orchestrator/workspaces/registry.ts",
      "orchestrator/workspaces/registry.ts",
    ]);
    expect(named.get("not_on_menu")).toEqual(["orchestrator/agents/turn-ledger.ts"]);
    expect(named.get("method_not_allowed")).toEqual(["orchestrator/http/api-server.ts"]);
  });

  it("lists every code the source names at a throw site", () => {
    expect([...named.keys()].filter((c) => !isErrorCode(c))).toEqual([]);
  });

  it("lists no code the source never answers (the Harness's relayed words count)", () => {
    const answered = new Set([...named.keys(), ...RELAYED]);
    expect(ERROR_CODES.filter((c) => !answered.has(c))).toEqual([]);
  });

  it("answers every error through the catalogue: the router's one sendError is `fail`", () => {
    const calls = SOURCES.flatMap(({ file, text }) =>
      [...text.matchAll(/\bsendError\(/g)].map((m) => `${file}: ${text.slice(m.index, m.index + 40)}`),
    );
    expect(calls).toEqual(["orchestrator/http/api-server.ts: sendError(res, ERRORS[code].status, code"]);
  });

  it("gives each code one status, from the list", () => {
    for (const code of ERROR_CODES) expect(new HttpError(code, "x").status).toBe(ERRORS[code].status);
    expect(new HttpError("runtime_class_refused", "x")).toMatchObject({ status: 403, code: "runtime_class_refused" });
    expect(new HttpError("harness_error", "x").status).toBe(502);
  });

  it("says for each code what it means and what the caller does", () => {
    for (const code of ERROR_CODES) {
      expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      expect(ERRORS[code].meaning).toMatch(/\.$/);
      expect(ERRORS[code].action).toMatch(/\.$/);
    }
  });

  it("refuses an unknown code at compile time", () => {
    const unknown = () =>
      // @ts-expect-error: a code the catalogue lacks does not compile (tsc --noEmit checks this line)
      new HttpError("no_such_code", "x");
    expect(unknown).toThrow(TypeError);
  });
});

describe("the OpenAPI documents name the codes", () => {
  type Doc = {
    paths: Record<string, Record<string, { responses?: Record<string, { "x-error-codes"?: ErrorCode[] }> }>>;
    components: { schemas: Record<string, { properties?: Record<string, { properties?: Record<string, unknown> }> }> };
  };
  const doc = openApiDocument() as Doc;
  // The Harness's routes' own document (decision 0077): together they answer every code.
  const sandbox = openApiDocument("sandbox") as Doc;
  const both = { ...doc.paths, ...sandbox.paths };

  it("enumerates on the error body's code the catalogue's words each document's callers may meet", () => {
    const machine = ERROR_CODES.filter((c) => ERRORS[c].caller === "any" || ERRORS[c].caller === "machine");
    const harness = ERROR_CODES.filter((c) => ERRORS[c].caller !== "replica");
    expect(doc.components.schemas.Error.properties?.error.properties?.code).toMatchObject({ enum: machine });
    expect(sandbox.components.schemas.Error.properties?.error.properties?.code).toMatchObject({ enum: harness });
    expect(machine).not.toContain("rate_limited");
    // Only a replica forwarding a call meets not_owner (decision 0079); anyone may meet unavailable.
    expect(harness).not.toContain("not_owner");
    expect(machine).toContain("unavailable");
  });

  it("names a code only on an answer of the code's status", () => {
    const wrong: string[] = [];
    for (const [path, item] of Object.entries(both))
      for (const [method, op] of Object.entries(item))
        for (const [status, answer] of Object.entries(op.responses ?? {}))
          for (const code of answer["x-error-codes"] ?? [])
            if (String(ERRORS[code]?.status) !== status) wrong.push(`${method} ${path} ${status}: ${code}`);
    expect(wrong).toEqual([]);
  });

  it("names every code on some answer, but the 405 a path gives a method it does not serve and a replica's own", () => {
    const named = new Set(
      Object.values(both)
        .flatMap((item) => Object.values(item))
        .flatMap((op) => Object.values(op.responses ?? {}))
        .flatMap((answer) => answer["x-error-codes"] ?? []),
    );
    const unnamed = ERROR_CODES.filter((code) => !named.has(code));
    expect(unnamed).toEqual(["method_not_allowed", "not_owner"]);
  });
});
