// zod -> the structural OpenAPI v3 subset a CustomResourceDefinition accepts. zod's own JSON
// Schema output is the starting point; this removes what a CRD refuses (`$schema`, `propertyNames`,
// `additionalProperties: false` beside `properties`, the ±2^53 bounds zod adds to integers) and
// turns int-or-string unions into `x-kubernetes-int-or-string` (docs/decisions/0003).
import { z } from "zod";

export type JSONSchemaProps = {
  type?: string;
  format?: string;
  description?: string;
  properties?: Record<string, JSONSchemaProps>;
  required?: string[];
  items?: JSONSchemaProps;
  additionalProperties?: JSONSchemaProps | boolean;
  enum?: unknown[];
  default?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  anyOf?: JSONSchemaProps[];
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  [key: string]: unknown;
};

const SAFE = Number.MAX_SAFE_INTEGER;

/** Converts one zod schema to a CRD's openAPIV3Schema. Throws on shapes a CRD cannot express. */
export function crdSchemaOf(schema: z.ZodType): JSONSchemaProps {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "throw", reused: "inline" });
  return structural(json as JSONSchemaProps, "");
}

function structural(s: JSONSchemaProps, path: string): JSONSchemaProps {
  if (s.$ref || s.$defs) throw new Error(`${path || "<root>"}: recursive schemas cannot go into a CRD`);
  if (s["x-kubernetes-int-or-string"]) {
    return {
      "x-kubernetes-int-or-string": true,
      ...(s.description ? { description: s.description } : {}),
      ...(s.default !== undefined ? { default: s.default } : {}),
    };
  }
  // zod writes a union of plain types (or a nullable) as a type array; a CRD takes one type.
  if (s.anyOf || s.oneOf || s.allOf || Array.isArray(s.type)) throw new Error(`${path}: unions cannot go into a CRD`);
  const out: JSONSchemaProps = {};
  for (const [key, value] of Object.entries(s)) {
    switch (key) {
      case "$schema":
      case "propertyNames":
      case "id":
        break;
      case "minimum":
        if (value !== -SAFE) out.minimum = value as number;
        break;
      case "maximum":
        if (value !== SAFE) out.maximum = value as number;
        break;
      case "properties":
        out.properties = Object.fromEntries(
          Object.entries(value as Record<string, JSONSchemaProps>).map(([k, v]) => [k, structural(v, `${path}.${k}`)]),
        );
        break;
      case "items":
        out.items = structural(value as JSONSchemaProps, `${path}[]`);
        break;
      case "additionalProperties":
        // `false` is what zod writes for a strict object; a CRD prunes or refuses unknown fields
        // by itself, and forbids additionalProperties beside properties.
        // `{}` is zod's z.unknown(): a map of anything, which a CRD spells preserve-unknown-fields.
        if (typeof value === "object" && Object.keys(value as object).length === 0) {
          out["x-kubernetes-preserve-unknown-fields"] = true;
        } else if (typeof value === "object") {
          out.additionalProperties = structural(value as JSONSchemaProps, `${path}.*`);
        }
        break;
      case "required":
        if ((value as string[]).length) out.required = [...(value as string[])].sort();
        break;
      default:
        out[key] = value;
    }
  }
  if (out.type === "object" && !out.properties && !out.additionalProperties) {
    out["x-kubernetes-preserve-unknown-fields"] = true;
  }
  return out;
}
