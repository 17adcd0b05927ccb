// The API's OpenAPI documents as a generator reads them (decision 0077): every operation named
// (operationId, unique, its route's id) and tagged from the route table, servers declared, the
// headers the server really sends or reads (Retry-After, Last-Event-ID, Location) declared where it
// does, HEAD /healthz documented, the delete's own answer, every error answer naming codes of the
// catalogue, a Harness's routes in their own document only; and both documents valid OpenAPI 3.1
// by a well-known validator (@seriousme/openapi-schema-validator, a devDependency).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ERRORS, isErrorCode } from "../../api/orchestrator-errors";
import { ROUTES, TAGS, isInternal, type RouteId } from "../../api/orchestrator-routes";
import { openApiDocument, type Audience } from "../../orchestrator/http/openapi-document";

type Header = { schema?: { type?: string }; required?: boolean };
type Answer = { content?: Record<string, unknown>; headers?: Record<string, Header>; "x-error-codes"?: string[] };
type Op = {
  operationId?: string;
  tags?: string[];
  parameters?: Array<{ name: string; in: string }>;
  responses: Record<string, Answer>;
};
type Doc = {
  openapi: string;
  servers?: Array<{ url: string; variables?: Record<string, { default: string }> }>;
  tags?: Array<{ name: string; description: string }>;
  paths: Record<string, Record<string, Op | unknown>>;
  components: { schemas: Record<string, Record<string, unknown>> };
};

const METHODS = ["get", "head", "post", "put", "delete"];
const docOf = (audience: Audience) => openApiDocument(audience) as Doc;
const DOCS = { public: docOf("public"), sandbox: docOf("sandbox") };

/** Every operation of a document: where it is, and it. */
function operations(doc: Doc): Array<{ where: string; path: string; method: string; op: Op }> {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, path, method, op: op as Op })),
  );
}

describe.each(Object.entries(DOCS))("the %s OpenAPI document", (audience, doc) => {
  const ops = operations(doc);

  it("names every operation by its route's id, once, and tags it with its route's tag, each tag declared", () => {
    const ids = ops.map((o) => o.op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    const declared = (doc.tags ?? []).map((t) => t.name);
    for (const { where, path, method, op } of ops) {
      const id = op.operationId as RouteId;
      expect([where, ROUTES[id]?.path, ROUTES[id]?.method]).toEqual([where, path, method.toUpperCase()]);
      expect([where, op.tags]).toEqual([where, [ROUTES[id].tag]]);
      expect(declared).toContain(ROUTES[id].tag);
    }
    for (const t of doc.tags ?? []) expect(t.description).toBe(TAGS[t.name as keyof typeof TAGS]);
  });

  it("holds its own routes of the table, every one of them", () => {
    const want = (Object.keys(ROUTES) as RouteId[]).filter((id) => isInternal(id) === (audience === "sandbox"));
    expect(ops.map((o) => o.op.operationId).sort()).toEqual(want.sort());
    if (audience === "public")
      expect(
        Object.keys(doc.paths).filter((p) => p.startsWith("/v1/sandbox/") || p.startsWith("/orchestrator")),
      ).toEqual([]);
  });

  it("names on every error answer codes of the catalogue, of its status, that its callers may meet", () => {
    const error = doc.components.schemas.Error as {
      properties: { error: { properties: { code: { enum: string[] } } } };
    };
    const enumerated = error.properties.error.properties.code.enum;
    const wrong: string[] = [];
    for (const { where, op } of ops)
      for (const [status, answer] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        const codes = answer["x-error-codes"] ?? [];
        if (!codes.length) wrong.push(`${where} ${status}: no x-error-codes`);
        for (const code of codes)
          if (!isErrorCode(code) || String(ERRORS[code].status) !== status || !enumerated.includes(code))
            wrong.push(`${where} ${status}: ${code}`);
      }
    expect(wrong).toEqual([]);
  });

  it("declares servers: a relative default, then an address with the host a variable", () => {
    expect(doc.servers?.[0]).toMatchObject({ url: "/" });
    expect(doc.servers?.[1]?.url).toContain("{host}");
    expect(doc.servers?.[1]?.variables?.host?.default).toMatch(/^[a-z0-9.-]+:\d+$/);
  });

  it("resolves every $ref", () => {
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]);
    expect(refs.length).toBeGreaterThan(2);
    expect(refs.filter((r) => !doc.components.schemas[r])).toEqual([]);
  });

  it("declares Retry-After on exactly the answers the server sends it with (rate_limited, unavailable)", () => {
    // api-server.ts sends `retry-after` in two places: with rate_limited, and with unavailable (a
    // workspace moving between replicas, decision 0079).
    const server = readFileSync(join(__dirname, "..", "..", "orchestrator", "http", "api-server.ts"), "utf8");
    const sent = [...server.matchAll(/"retry-after"/g)].map((m) => server.slice(Math.max(0, m.index - 300), m.index));
    expect(sent).toHaveLength(2);
    expect(sent.map((s) => /"(rate_limited|unavailable)"/.exec(s)?.[1]).sort()).toEqual([
      "rate_limited",
      "unavailable",
    ]);
    for (const { where, op } of ops)
      for (const [status, answer] of Object.entries(op.responses)) {
        const codes = answer["x-error-codes"] ?? [];
        const told = codes.includes("rate_limited") || codes.includes("unavailable");
        expect([where, status, Boolean(answer.headers?.["Retry-After"])]).toEqual([where, status, told]);
      }
  });
});

describe("what the public document says of particular routes", () => {
  const ops = Object.fromEntries(operations(DOCS.public).map((o) => [o.op.operationId, o.op]));

  it("declares Last-Event-ID on the turn's event stream, the one stream that reads it", () => {
    expect(ops.turnEvents!.parameters).toEqual([
      expect.objectContaining({ name: "Last-Event-ID", in: "header", required: false }),
    ]);
    expect(ops.workspaceEvents!.parameters).toBeUndefined();
  });

  it("documents HEAD /healthz: the GET's status, no body, no token", () => {
    expect(ops.healthzHead).toMatchObject({ security: [], responses: { "200": { description: expect.any(String) } } });
    expect(ops.healthzHead!.responses["200"]!.content).toBeUndefined();
  });

  it("gives the delete's answer its own schema, and says where a created object lives", () => {
    const ref = (op: Op, status: string) =>
      (op.responses[status]!.content!["application/json"] as { schema: { $ref: string } }).schema.$ref;
    expect(ref(ops.deleteWorkspace!, "202")).toBe("#/components/schemas/Deleted");
    expect(ref(ops.createWorkspace!, "202")).toBe("#/components/schemas/Created");
    expect(DOCS.public.components.schemas.Deleted).not.toEqual(DOCS.public.components.schemas.Created);
    expect(ops.createWorkspace!.responses["202"]!.headers?.Location).toBeDefined();
    expect(ops.createEffect!.responses["202"]!.headers?.Location).toBeDefined();
  });
});

describe("a well-known OpenAPI 3.1 validator", () => {
  /** The validator's command line, resolved from node_modules. */
  const cli = (() => {
    try {
      return join(
        dirname(require.resolve("@seriousme/openapi-schema-validator/package.json")),
        "bin",
        "validate-api-cli.js",
      );
    } catch {
      return undefined;
    }
  })();

  it.each(Object.keys(DOCS))("finds the %s document valid", (audience) => {
    if (!cli)
      throw new Error(
        "@seriousme/openapi-schema-validator is not installed: add it as a devDependency, pinned " +
          "(`npm install --save-dev --save-exact @seriousme/openapi-schema-validator@2.11.0`)",
      );
    const dir = mkdtempSync(join(tmpdir(), "jr2-openapi-"));
    try {
      const file = join(dir, `${audience}.json`);
      writeFileSync(file, JSON.stringify(DOCS[audience as Audience]));
      const run = spawnSync(process.execPath, [cli, file], { encoding: "utf8", timeout: 60_000 });
      expect({ status: run.status, out: run.stdout + run.stderr }).toEqual({
        status: 0,
        out: expect.stringContaining('"valid": true'),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
