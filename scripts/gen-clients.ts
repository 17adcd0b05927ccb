// Writes the clients' copies of the API's route table and body types from the OpenAPI document the
// Orchestrator serves (openapi-document.ts, itself from the server's zod schemas and the route
// table): clients/typescript/src/api.ts and clients/python/jr2_orchestrator/api.py, and the Python
// client's exceptions, one per error code a Machine may meet, from the error catalogue
// (clients/python/jr2_orchestrator/errors.py). Only the public document's routes: a Harness's are
// no Machine's (decision 0077). The clients build on their own, so they hold a copy; a unit test
// holds each copy equal to what this writes (docs/decisions/0061-clients-beyond-typescript.md).
// `npx tsx scripts/gen-clients.ts`.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openApiDocument } from "../orchestrator/http/openapi-document";
import { ROUTES, isInternal, type RouteId } from "../api/orchestrator-routes";
import { ERRORS, MACHINE_ERROR_CODES, type ErrorCode } from "../api/orchestrator-errors";

const ROOT = join(__dirname, "..");
export const GENERATED = {
  typescript: "clients/typescript/src/api.ts",
  python: "clients/python/jr2_orchestrator/api.py",
  pythonErrors: "clients/python/jr2_orchestrator/errors.py",
} as const;

/** The routes the public clients carry: the public document's. */
export const CLIENT_ROUTES = (Object.keys(ROUTES) as RouteId[]).filter((id) => !isInternal(id));

/** The codes the public clients type: those a Machine may meet (the public document's enum). */
export const CLIENT_ERROR_CODES = MACHINE_ERROR_CODES;

type Json = { [k: string]: unknown };

/** A type as both languages write it. */
type T =
  | { k: "prim"; p: "string" | "integer" | "number" | "boolean" | "null" | "unknown" }
  | { k: "lit"; values: Array<string | number | boolean> }
  | { k: "array"; item: T }
  | { k: "record"; value: T }
  | { k: "union"; members: T[] }
  | { k: "ref"; name: string };

type Prop = { key: string; type: T; required: boolean; description?: string };
/** A named type: an object (a TypedDict in Python) or an alias of a union. */
type Named = { name: string; description?: string } & ({ kind: "object"; props: Prop[] } | { kind: "alias"; type: T });

const RENAMED: Record<string, string> = { Error: "ErrorBody" };

const pascal = (s: string) =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");

/** Reads the document's JSON Schemas into named types, children before the types that use them. */
class Model {
  readonly named: Named[] = [];
  /** A schema's canonical JSON to the name it got first: one shape, one name. */
  readonly #seen = new Map<string, string>();

  /** Each component's canonical JSON to its name: a shape inlined elsewhere too (a route's answer
   * naming `Admission` inline) takes the component's name, not its first place's. */
  readonly #components = new Map<string, string>();

  constructor(readonly components: Record<string, Json>) {
    for (const [name, schema] of Object.entries(components))
      this.#components.set(JSON.stringify(schema), RENAMED[name] ?? name);
  }

  /** The component `name`, named so (`Error` as ErrorBody: the languages have an Error already). */
  component(name: string): string {
    const as = RENAMED[name] ?? name;
    if (!this.named.some((n) => n.name === as)) this.name(this.components[name]!, as);
    return as;
  }

  /** `schema` as a named type (an object or a union), or inline when it is neither. */
  name(schema: Json, name: string): T {
    const key = JSON.stringify(schema);
    const known = this.#seen.get(key);
    if (known) return { k: "ref", name: known };
    // Written before its first user, so Python's run-time aliases find it defined.
    const component = [...Object.keys(this.components)].find((c) => (RENAMED[c] ?? c) === this.#components.get(key));
    if (component && (RENAMED[component] ?? component) !== name) return { k: "ref", name: this.component(component) };
    const description = typeof schema.description === "string" ? schema.description : undefined;
    if (schema.type === "object" && schema.properties) {
      const required = new Set((schema.required as string[] | undefined) ?? []);
      const props = Object.entries(schema.properties as Record<string, Json>).map(([key, s]) => ({
        key,
        type: this.type(s, name + pascal(key)),
        required: required.has(key),
        ...(typeof s.description === "string" ? { description: s.description } : {}),
      }));
      this.add({ name, kind: "object", props, ...(description ? { description } : {}) }, key);
      return { k: "ref", name };
    }
    const variants = (schema.oneOf ?? schema.anyOf) as Json[] | undefined;
    if (variants) {
      const members = variants.map((v, i) => this.type(v, name + pascal(discriminant(v) ?? String(i + 1))));
      this.add({ name, kind: "alias", type: { k: "union", members }, ...(description ? { description } : {}) }, key);
      return { k: "ref", name };
    }
    return this.type(schema, name);
  }

  /** `schema` as a type; objects and unions within it named after `name`. */
  type(schema: Json, name: string): T {
    if (typeof schema.$ref === "string") {
      return { k: "ref", name: this.component(schema.$ref.replace("#/components/schemas/", "")) };
    }
    if (schema.oneOf || schema.anyOf) {
      const variants = (schema.oneOf ?? schema.anyOf) as Json[];
      // A nullable: the other member inline.
      if (variants.length === 2 && variants.some((v) => v.type === "null") && !variants.some((v) => v.properties))
        return { k: "union", members: variants.map((v) => this.type(v, name)) };
      return this.name(schema, name);
    }
    if ("const" in schema) return { k: "lit", values: [schema.const as string] };
    // `type: ["string", "null"]` (zod's nullable of a primitive): the union of each.
    if (Array.isArray(schema.type))
      return { k: "union", members: (schema.type as string[]).map((t) => this.type({ ...schema, type: t }, name)) };
    if (Array.isArray(schema.enum)) return { k: "lit", values: schema.enum as string[] };
    switch (schema.type) {
      case "object":
        if (schema.properties) return this.name(schema, name);
        if (schema.additionalProperties && typeof schema.additionalProperties === "object")
          return { k: "record", value: this.type(schema.additionalProperties as Json, name + "Value") };
        return { k: "record", value: { k: "prim", p: "unknown" } };
      case "array":
        return { k: "array", item: this.type((schema.items as Json | undefined) ?? {}, name + "Item") };
      case "string":
      case "integer":
      case "number":
      case "boolean":
      case "null":
        return { k: "prim", p: schema.type };
      case undefined:
        return { k: "prim", p: "unknown" };
      default:
        throw new Error(`${name}: a schema of type ${JSON.stringify(schema.type)} has no client type yet`);
    }
  }

  private add(n: Named, key: string): void {
    if (this.named.some((m) => m.name === n.name)) throw new Error(`two shapes would be named ${n.name}`);
    this.#seen.set(key, n.name);
    this.named.push(n);
  }
}

/** The value of a variant's `const` property (its discriminator), when it has one. */
function discriminant(variant: Json): string | undefined {
  for (const p of Object.values((variant.properties as Record<string, Json> | undefined) ?? {}))
    if (typeof p.const === "string") return p.const;
  return undefined;
}

/** What each route sends and answers, by the document's operation for it. */
type RouteTypes = { id: RouteId; body?: T; answer?: T; status?: number; event?: T };

function routeTypes(model: Model, doc: Json): RouteTypes[] {
  const paths = doc.paths as Record<string, Record<string, Json>>;
  return CLIENT_ROUTES.map((id) => {
    const { method, path } = ROUTES[id];
    const op = paths[path]?.[method.toLowerCase()];
    if (!op) return { id };
    const out: RouteTypes = { id };
    const body = (op.requestBody as Json | undefined)?.content as Record<string, { schema: Json }> | undefined;
    if (body?.["application/json"]) out.body = model.type(body["application/json"].schema, `${pascal(id)}Body`);
    const responses = op.responses as Record<string, Json>;
    const ok = Object.keys(responses)
      .filter((s) => /^2\d\d$/.test(s))
      .sort()[0];
    if (!ok) return out;
    out.status = Number(ok);
    const content = responses[ok]!.content as Record<string, { schema: Json }> | undefined;
    if (content?.["application/json"])
      out.answer = model.type(content["application/json"].schema, `${pascal(id)}Answer`);
    if (content?.["text/event-stream"])
      out.event = model.type(content["text/event-stream"].schema, `${pascal(id)}Event`);
    return out;
  });
}

/** A named alias both clients write: each route's `<Route>Body`, `<Route>Answer` and `<Route>Event`
 * (what the clients' code names, whatever the document calls the shape), then the readable names a
 * Machine uses, unless the document names a shape so already. */
type Alias = { name: string; type: T };

/** The type of property `key` of the object `t` names; of its items when `items` is set. */
function propOf(model: Model, t: T | undefined, key: string, items = false): T | undefined {
  const named = t?.k === "ref" ? model.named.find((n) => n.name === t.name) : undefined;
  let p = named?.kind === "object" ? named.props.find((q) => q.key === key)?.type : undefined;
  if (items) p = p?.k === "array" ? p.item : undefined;
  return p;
}

function aliasesOf(model: Model, routes: RouteTypes[]): Alias[] {
  const out: Alias[] = [];
  const taken = (name: string) => model.named.some((n) => n.name === name) || out.some((a) => a.name === name);
  for (const r of routes)
    for (const [suffix, t] of [
      ["Body", r.body],
      ["Answer", r.answer],
      ["Event", r.event],
    ] as const) {
      const name = pascal(r.id) + suffix;
      if (!t || (t.k === "ref" && t.name === name)) continue;
      if (taken(name)) throw new Error(`${name}: a shape of the document has the name of a route's alias`);
      out.push({ name, type: t });
    }
  const by = (id: RouteId) => routes.find((r) => r.id === id)!;
  const readable: Array<[string, T | undefined]> = [
    ["TurnSubmitted", by("submitTurn").answer],
    ["AbortReceipt", by("abortTurn").answer],
    ["AllowedSet", by("setAllowed").answer],
    ["OutstandingPick", propOf(model, by("listPicks").answer, "items", true)],
    ["MenuTool", propOf(model, by("submitTurn").body, "menu", true)],
  ];
  for (const [name, t] of readable) {
    if (!t) throw new Error(`${name}: the document no longer has the shape it names`);
    if (!taken(name)) out.push({ name, type: t });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// TypeScript

function ts(t: T): string {
  switch (t.k) {
    case "prim":
      return t.p === "integer" ? "number" : t.p;
    case "lit":
      return t.values.map((v) => JSON.stringify(v)).join(" | ");
    case "array": {
      const item = ts(t.item);
      return /[ |]/.test(item) ? `Array<${item}>` : `${item}[]`;
    }
    case "record":
      return `Record<string, ${ts(t.value)}>`;
    case "union":
      return t.members.map(ts).join(" | ");
    case "ref":
      return t.name;
  }
}

const tsDoc = (text: string | undefined, indent = "") =>
  text ? `${indent}/** ${text.replace(/\*\//g, "*\\/").replace(/\n/g, `\n${indent} * `)} */\n` : "";

const tsKey = (key: string) => (/^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key));

function typescript(model: Model, routes: RouteTypes[]): string {
  const out: string[] = [
    "// Generated by scripts/gen-clients.ts from the Orchestrator's OpenAPI document: do not edit.",
    "// The route table (api/orchestrator-routes.ts) and every body and answer, as types.",
    "",
    `export type Method = "GET" | "HEAD" | "POST" | "PUT" | "DELETE";`,
    `export type Auth = "none" | "api";`,
    "",
    "/** Every route: its method, its path template and who may call it. */",
    "export const ROUTES = {",
    ...CLIENT_ROUTES.map(
      (id) =>
        `  ${id}: { method: ${JSON.stringify(ROUTES[id].method)}, path: ${JSON.stringify(ROUTES[id].path)}, auth: ${JSON.stringify(ROUTES[id].auth)} },`,
    ),
    "} as const;",
    "export type RouteId = keyof typeof ROUTES;",
    "",
    "/** Every error code a Machine may meet (docs/api/errors.md), and the HTTP status it always comes with. */",
    "export const ERROR_STATUS = {",
    ...CLIENT_ERROR_CODES.map((c) => `  ${c}: ${ERRORS[c].status},`),
    "} as const;",
    "export type ErrorCode = keyof typeof ERROR_STATUS;",
    "",
  ];
  for (const n of model.named) {
    out.push(tsDoc(n.description).trimEnd());
    if (n.kind === "alias") out.push(`export type ${n.name} = ${ts(n.type)};`);
    else {
      out.push(`export type ${n.name} = {`);
      for (const p of n.props)
        out.push(`${tsDoc(p.description, "  ")}  ${tsKey(p.key)}${p.required ? "" : "?"}: ${ts(p.type)};`);
      out.push("};");
    }
    out.push("");
  }
  out.push("/* What each route sends, answers and streams, by the route's id; and the names a Machine reads. */");
  for (const a of aliasesOf(model, routes)) out.push(`export type ${a.name} = ${ts(a.type)};`);
  out.push(
    "",
    "/** What each route sends (`body`), answers (`answer`, with `status`) and streams (`event`); `never`: nothing. */",
    "export type RouteTypes = {",
  );
  for (const r of routes) {
    const parts = [
      `body: ${r.body ? ts(r.body) : "never"}`,
      `answer: ${r.answer ? ts(r.answer) : "never"}`,
      `status: ${r.status ?? "never"}`,
      `event: ${r.event ? ts(r.event) : "never"}`,
    ];
    out.push(`  ${r.id}: { ${parts.join("; ")} };`);
  }
  out.push("};", "");
  return out.filter((l, i, all) => !(l === "" && all[i - 1] === "")).join("\n");
}

// ---------------------------------------------------------------------------------------------
// Python

const PY_KEYWORDS = new Set(
  "False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield".split(
    " ",
  ),
);

function py(t: T): string {
  switch (t.k) {
    case "prim":
      return { string: "str", integer: "int", number: "float", boolean: "bool", null: "None", unknown: "Any" }[t.p];
    case "lit":
      return `Literal[${t.values.map((v) => (typeof v === "boolean" ? (v ? "True" : "False") : JSON.stringify(v))).join(", ")}]`;
    case "array":
      return `list[${py(t.item)}]`;
    case "record":
      return `dict[str, ${py(t.value)}]`;
    case "union":
      return t.members.map(py).join(" | ");
    case "ref":
      return t.name;
  }
}

const pyDoc = (text: string | undefined, indent: string) =>
  text ? `${indent}"""${text.replace(/\\/g, "\\\\").replace(/"""/g, '\\"\\"\\"')}"""` : undefined;

function python(model: Model, routes: RouteTypes[]): string {
  const out: string[] = [
    "# Generated by scripts/gen-clients.ts from the Orchestrator's OpenAPI document: do not edit.",
    "# The route table (api/orchestrator-routes.ts) and every body and answer, as TypedDicts.",
    "from __future__ import annotations",
    "",
    "from typing import Any, Final, Literal, NamedTuple, NotRequired, TypeAlias, TypedDict",
    "",
    "",
    "class Route(NamedTuple):",
    '    """A route: its method, its path template and who may call it."""',
    "",
    "    method: str",
    "    path: str",
    "    auth: str",
    "",
    "",
    "ROUTES: Final[dict[str, Route]] = {",
    ...CLIENT_ROUTES.map(
      (id) =>
        `    ${JSON.stringify(id)}: Route(${JSON.stringify(ROUTES[id].method)}, ${JSON.stringify(ROUTES[id].path)}, ${JSON.stringify(ROUTES[id].auth)}),`,
    ),
    "}",
  ];
  const field = (p: Prop) => (p.required ? py(p.type) : `NotRequired[${py(p.type)}]`);
  for (const n of model.named) {
    out.push("", "");
    if (n.kind === "alias") {
      // A union of TypedDicts: a runtime expression, so its members are defined above it.
      out.push(`${n.name}: TypeAlias = ${py(n.type)}`);
      const doc = pyDoc(n.description, "");
      if (doc) out.push(doc);
      continue;
    }
    if (n.props.some((p) => PY_KEYWORDS.has(p.key) || !/^[A-Za-z_]\w*$/.test(p.key))) {
      // A key Python cannot write as a class attribute (`from`): the functional form.
      out.push(`${n.name} = TypedDict(`, `    ${JSON.stringify(n.name)},`, "    {");
      for (const p of n.props) out.push(`        ${JSON.stringify(p.key)}: ${field(p)},`);
      out.push("    },", ")");
      const doc = pyDoc(n.description, "");
      if (doc) out.push(doc);
      continue;
    }
    out.push(`class ${n.name}(TypedDict):`);
    const doc = pyDoc(n.description, "    ");
    if (doc) out.push(doc, "");
    for (const p of n.props) {
      out.push(`    ${p.key}: ${field(p)}`);
      const pdoc = pyDoc(p.description, "    ");
      if (pdoc) out.push(pdoc);
    }
  }
  out.push("", "", "# What each route sends, answers and streams, by the route's id; and the names a Machine reads.");
  for (const a of aliasesOf(model, routes)) out.push(`${a.name}: TypeAlias = ${py(a.type)}`);
  out.push("");
  return out.join("\n");
}

/** A code's exception class: `not_found` is NotFoundError. */
export const errorClassOf = (code: ErrorCode) => `${pascal(code)}Error`;

const pyText = (text: string) => text.replace(/\\/g, "\\\\").replace(/"""/g, '\\"\\"\\"');

function pythonErrors(): string {
  const out = [
    "# Generated by scripts/gen-clients.ts from the error catalogue (api/orchestrator-errors.ts): do not edit.",
    '"""The API\'s errors as exceptions: :class:`Jr2Error`, and one subclass per error code a Machine may',
    "meet (docs/api/errors.md), each with the code's HTTP status. An error answer raises its code's",
    "class; a code newer than this client, or an answer that is no API error (codes ``http``,",
    '``unreadable``, ``stream``, ``timeout``), raises :class:`Jr2Error` itself."""',
    "from __future__ import annotations",
    "",
    "from typing import ClassVar, Final",
    "",
    "",
    "class Jr2Error(Exception):",
    '    """An error the API answered (``{"error": {"code", "message"}}``), or an answer this client could',
    "    not read. ``code``: the API's word (or this client's); ``status``: the HTTP status; ``message``: for",
    '    people; ``request_id``: the answer\'s ``x-request-id`` header, when a proxy in front added one."""',
    "",
    "    def __init__(self, status: int, code: str, message: str, request_id: str | None = None) -> None:",
    "        super().__init__(message)",
    "        self.status = status",
    "        self.code = code",
    "        self.message = message",
    "        self.request_id = request_id",
    "",
    "    def __repr__(self) -> str:",
    "        return (",
    '            f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r}"',
    '            + (f", request_id={self.request_id!r})" if self.request_id else ")")',
    "        )",
  ];
  for (const code of CLIENT_ERROR_CODES) {
    const e = ERRORS[code];
    out.push(
      "",
      "",
      `class ${errorClassOf(code)}(Jr2Error):`,
      `    """${pyText(e.meaning)}`,
      "",
      `    What the caller does: ${pyText(e.action)}"""`,
      "",
      `    CODE: ClassVar[str] = ${JSON.stringify(code)}`,
      `    STATUS: ClassVar[int] = ${e.status}`,
    );
  }
  out.push(
    "",
    "",
    "#: Each code's class.",
    "ERRORS: Final[dict[str, type[Jr2Error]]] = {",
    ...CLIENT_ERROR_CODES.map((c) => `    ${JSON.stringify(c)}: ${errorClassOf(c)},`),
    "}",
    "",
    "",
    "def error_for(status: int, code: str, message: str, request_id: str | None = None) -> Jr2Error:",
    '    """The exception of an error answer: its code\'s class, or Jr2Error for a code it does not know."""',
    "    return ERRORS.get(code, Jr2Error)(status, code, message, request_id)",
    "",
    "",
    "__all__ = [",
    '    "ERRORS",',
    '    "Jr2Error",',
    '    "error_for",',
    ...CLIENT_ERROR_CODES.map((c) => `    ${JSON.stringify(errorClassOf(c))},`),
    "]",
    "",
  );
  return out.join("\n");
}

/** The generated files, by path from the repository's root. */
export function generate(doc: Json = openApiDocument() as Json): Record<string, string> {
  const components = (doc.components as { schemas: Record<string, Json> }).schemas;
  const model = new Model(components);
  for (const name of Object.keys(components)) model.component(name);
  const routes = routeTypes(model, doc);
  return {
    [GENERATED.typescript]: typescript(model, routes),
    [GENERATED.python]: python(model, routes),
    [GENERATED.pythonErrors]: pythonErrors(),
  };
}

/** The generated files that differ from what is committed. */
export function drifted(root = ROOT): string[] {
  return Object.entries(generate())
    .filter(([path, text]) => {
      try {
        return readFileSync(join(root, path), "utf8") !== text;
      } catch {
        return true;
      }
    })
    .map(([path]) => path);
}

if (require.main === module)
  for (const [path, text] of Object.entries(generate())) writeFileSync(join(ROOT, path), text);
