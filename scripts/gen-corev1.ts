// Converts the core/v1 definitions a Sandbox embeds (Container, Volume, EnvVar, ...) from the
// OpenAPI that kube-apiserver serves at /openapi/v3/api/v1 into zod schemas, once, so nobody
// hand-writes core/v1 (docs/decisions/0003-one-source-of-truth-for-crds.md). The CRD side follows
// from these through scripts/gen-crds.ts, so both sides come from the server's own words.
//
//   npm run gen:corev1                  # asks the cluster in KUBECONFIG (npm run cluster -- up)
//   npm run gen:corev1 -- openapi.json  # or converts a saved copy of /openapi/v3/api/v1
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The definitions a Sandbox embeds; everything they reference comes along. */
const ROOTS = [
  "io.k8s.api.core.v1.Container",
  "io.k8s.api.core.v1.EnvFromSource",
  "io.k8s.api.core.v1.EnvVar",
  "io.k8s.api.core.v1.HostAlias",
  "io.k8s.api.core.v1.ResourceRequirements",
  "io.k8s.api.core.v1.SecurityContext",
  "io.k8s.api.core.v1.Toleration",
  "io.k8s.api.core.v1.Volume",
  "io.k8s.api.core.v1.VolumeMount",
];

const OUT = join(__dirname, "..", "api", "crd", "generated", "corev1.ts");

type OpenAPISchema = {
  type?: string;
  format?: string;
  description?: string;
  properties?: Record<string, OpenAPISchema>;
  required?: string[];
  items?: OpenAPISchema;
  additionalProperties?: OpenAPISchema | boolean;
  allOf?: OpenAPISchema[];
  oneOf?: OpenAPISchema[];
  enum?: unknown[];
  $ref?: string;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
};

const INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity";
/** Embedded ObjectMeta (an ephemeral volume's claim template) keeps what the API server copies from
 * it, labels and annotations: managedFields and the rest do not belong in a template. */
const OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const OBJECT_META_KEPT = ["labels", "annotations"];

function loadSpec(): { doc: { components: { schemas: Record<string, OpenAPISchema> } }; source: string } {
  const file = process.argv[2];
  if (file) return { doc: JSON.parse(readFileSync(file, "utf8")), source: file };
  const kubectl = process.env.KUBECTL ?? "kubectl";
  const raw = execFileSync(kubectl, ["get", "--raw", "/openapi/v3/api/v1"], { maxBuffer: 64 << 20 });
  return { doc: JSON.parse(raw.toString()), source: "kube-apiserver /openapi/v3/api/v1" };
}

function serverVersion(): string {
  if (process.argv[2]) return process.env.K8S_VERSION ?? "unknown";
  const kubectl = process.env.KUBECTL ?? "kubectl";
  const raw = execFileSync(kubectl, ["get", "--raw", "/version"]).toString();
  return (JSON.parse(raw) as { gitVersion: string }).gitVersion;
}

const refName = (ref: string) => ref.replace("#/components/schemas/", "");
const shortName = (full: string) => full.split(".").pop()!;

/** A field's own schema, seeing through the `allOf: [{$ref}]` wrapper k8s uses to attach a description. */
function target(s: OpenAPISchema): string | undefined {
  if (s.$ref) return refName(s.$ref);
  if (s.allOf?.length === 1 && s.allOf[0].$ref) return refName(s.allOf[0].$ref);
  return undefined;
}

/** Every definition reachable from the roots, dependencies before dependents. */
function closure(schemas: Record<string, OpenAPISchema>): string[] {
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (name: string, path: string[]) => {
    if (seen.has(name)) return;
    if (path.includes(name)) throw new Error(`recursive definition ${[...path, name].join(" -> ")}: not supported`);
    const def = schemas[name];
    if (!def) throw new Error(`definition ${name} missing from the OpenAPI document`);
    const walk = (s: OpenAPISchema | undefined) => {
      if (!s) return;
      const t = target(s);
      if (t) return visit(t, [...path, name]);
      Object.values(s.properties ?? {}).forEach(walk);
      walk(s.items);
      if (typeof s.additionalProperties === "object") walk(s.additionalProperties);
    };
    walk(name === OBJECT_META ? trimmedMeta(def) : def);
    seen.add(name);
    order.push(name);
  };
  ROOTS.forEach((r) => visit(r, []));
  return order;
}

const q = (s: string) => JSON.stringify(s);

function trimmedMeta(def: OpenAPISchema): OpenAPISchema {
  const properties = Object.fromEntries(
    Object.entries(def.properties ?? {}).filter(([k]) => OBJECT_META_KEPT.includes(k)),
  );
  return { ...def, properties, required: [] };
}

/** zod source for one schema (a definition's body, or a field's). */
function zodOf(s: OpenAPISchema): string {
  const t = target(s);
  if (t === INT_OR_STRING) return "intOrString";
  if (t === QUANTITY) return "quantity";
  if (t) return shortName(t);
  if (s["x-kubernetes-preserve-unknown-fields"]) return "z.record(z.string(), z.unknown())";
  switch (s.type) {
    case "string":
      if (s.enum?.length) return `z.enum([${s.enum.map((e) => q(String(e))).join(", ")}])`;
      return "z.string()";
    case "integer":
      return s.format ? `z.number().int().meta({ format: ${q(s.format)} })` : "z.number().int()";
    case "number":
      return s.format ? `z.number().meta({ format: ${q(s.format)} })` : "z.number()";
    case "boolean":
      return "z.boolean()";
    case "array":
      return `z.array(${zodOf(s.items!)})`;
    case "object":
    case undefined:
      if (s.properties) return objectOf(s);
      if (typeof s.additionalProperties === "object") return `z.record(z.string(), ${zodOf(s.additionalProperties)})`;
      return "z.record(z.string(), z.unknown())";
    default:
      throw new Error(`unsupported schema type ${s.type}`);
  }
}

function objectOf(s: OpenAPISchema): string {
  const required = new Set(s.required ?? []);
  const fields = Object.entries(s.properties ?? {}).map(([name, field]) => {
    let src = zodOf(field);
    if (field.description) src += `.meta({ description: ${q(field.description)} })`;
    if (!required.has(name)) src += ".optional()";
    return `  ${/^[A-Za-z_$][\w$]*$/.test(name) ? name : q(name)}: ${src},`;
  });
  return `z.strictObject({\n${fields.join("\n")}\n})`;
}

function main() {
  const { doc, source } = loadSpec();
  const version = serverVersion();
  const schemas = doc.components.schemas;
  const names = closure(schemas).filter((n) => n !== INT_OR_STRING && n !== QUANTITY);
  const short = new Map<string, string>();
  for (const n of names) {
    const s = shortName(n);
    if (short.has(s)) throw new Error(`two definitions named ${s}: ${short.get(s)} and ${n}`);
    short.set(s, n);
  }
  const lines = [
    "// Generated by scripts/gen-corev1.ts: do not edit. Regenerate with `npm run gen:corev1` against",
    "// the local cluster (npm run cluster -- up). Source: " + source + ".",
    "/* eslint-disable */",
    'import { z } from "zod";',
    "",
    "/** The Kubernetes version whose OpenAPI these schemas were converted from. */",
    `export const KUBERNETES_VERSION = ${q(version)};`,
    "",
    `/** ${schemas[INT_OR_STRING]?.description ?? "An int32 or a string."} */`,
    'export const intOrString = z.union([z.number().int(), z.string()]).meta({ "x-kubernetes-int-or-string": true });',
    "",
    "/** A Kubernetes resource quantity such as `500m` or `1Gi` (k8s.io/apimachinery resource.Quantity). */",
    'export const quantity = z.union([z.number(), z.string()]).meta({ "x-kubernetes-int-or-string": true });',
    "",
  ];
  for (const n of names) {
    const def = n === OBJECT_META ? trimmedMeta(schemas[n]) : schemas[n];
    const body = def.properties ? objectOf(def) : zodOf(def);
    const meta = def.description ? `.meta({ description: ${q(def.description)} })` : "";
    lines.push(`export const ${shortName(n)} = ${body}${meta};`);
    lines.push(`export type ${shortName(n)} = z.infer<typeof ${shortName(n)}>;`, "");
  }
  writeFileSync(OUT, lines.join("\n"));
  console.log(`wrote ${OUT}: ${names.length} definitions from ${source} (${version})`);
}

main();
