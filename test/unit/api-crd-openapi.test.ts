import { z } from "zod";
import { crdSchemaOf, type JSONSchemaProps } from "../../api/crd/openapi";

const INT_OR_STRING = { "x-kubernetes-int-or-string": true };
const prop = (s: JSONSchemaProps, key: string) => s.properties![key];

describe("crdSchemaOf", () => {
  it("writes no additionalProperties: false for a strict object", () => {
    const s = crdSchemaOf(z.strictObject({ a: z.string(), b: z.strictObject({ c: z.string() }) }));
    expect(s.type).toBe("object");
    expect(s).not.toHaveProperty("additionalProperties");
    expect(prop(s, "b")).not.toHaveProperty("additionalProperties");
    expect(s.required).toEqual(["a", "b"]);
  });

  it("turns an int-or-string union into x-kubernetes-int-or-string, keeping its description", () => {
    const port = z.union([z.number().int(), z.string()]).meta(INT_OR_STRING).meta({ description: "the port" });
    const p = prop(crdSchemaOf(z.strictObject({ port })), "port");
    expect(p["x-kubernetes-int-or-string"]).toBe(true);
    expect(p.description).toBe("the port");
    expect(p).not.toHaveProperty("anyOf");
    expect(p).not.toHaveProperty("type");
  });

  it("turns a record of unknown values into x-kubernetes-preserve-unknown-fields", () => {
    const p = prop(crdSchemaOf(z.strictObject({ meta: z.record(z.string(), z.unknown()) })), "meta");
    expect(p.type).toBe("object");
    expect(p["x-kubernetes-preserve-unknown-fields"]).toBe(true);
    expect(p).not.toHaveProperty("additionalProperties");
    expect(p).not.toHaveProperty("propertyNames");
  });

  it("removes the ±2^53 bounds zod gives integers, keeping stated ones", () => {
    const s = crdSchemaOf(z.strictObject({ n: z.number().int(), m: z.number().int().min(0).max(10) }));
    expect(prop(s, "n").type).toBe("integer");
    expect(prop(s, "n")).not.toHaveProperty("minimum");
    expect(prop(s, "n")).not.toHaveProperty("maximum");
    expect(prop(s, "m").minimum).toBe(0);
    expect(prop(s, "m").maximum).toBe(10);
  });

  it.each([
    ["integer | string", z.union([z.number().int(), z.string()])],
    ["number | string", z.union([z.number(), z.string()])],
    ["string | boolean", z.union([z.string(), z.boolean()])],
  ])("throws on a %s union without int-or-string meta", (_name, u) => {
    expect(() => crdSchemaOf(z.strictObject({ u }))).toThrow(/union/);
  });

  it("keeps default values", () => {
    const s = crdSchemaOf(z.strictObject({ t: z.string().default("30m"), n: z.number().int().default(3) }));
    expect(prop(s, "t").default).toBe("30m");
    expect(prop(s, "n").default).toBe(3);
  });

  it("keeps the default of an int-or-string field", () => {
    const size = z.union([z.number(), z.string()]).meta(INT_OR_STRING).default("64Mi");
    const p = prop(crdSchemaOf(z.strictObject({ size })), "size");
    expect(p["x-kubernetes-int-or-string"]).toBe(true);
    expect(p.default).toBe("64Mi");
  });
});
