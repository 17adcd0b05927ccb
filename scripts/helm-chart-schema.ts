// The whole installation's values.schema.json (decision 0074): `helm install`, `helm template` and
// `helm lint` check the values against it before rendering and name the field of each mistake: an
// unknown key at any level the chart defines (additionalProperties false), a choice outside its
// enum, a namespace that is no DNS label, a caller without its namespace. The pod config is typed
// from its own zod schema (orchestrator/workspaces/pod-config.ts) as its input, the YAML a team
// writes, so a typo in podConfig is refused at install with its path, not when the Orchestrator
// reads it. Pure.
import { z } from "zod";
import { PodConfig } from "../orchestrator/workspaces/pod-config";
import { identitySchema } from "./helm-chart-identity";

/** A DNS label (RFC 1123), what a namespace's name is. */
export const DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/** A DNS subdomain (RFC 1123), what a Secret's name is. */
const DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/** The namespaces jr2 itself runs in, whose Secrets no Sandbox namespace role may reach. */
const OWN_NAMESPACES = ["jr2-system", "pepr-system", "kube-system"];

type Schema = Record<string, unknown>;
const strict = (properties: Record<string, Schema>, extra: Schema = {}): Schema => ({
  type: "object",
  additionalProperties: false,
  properties,
  ...extra,
});
const str: Schema = { type: "string" };
const stringMap: Schema = { type: "object", additionalProperties: { type: "string" } };
const namespaceName: Schema = { type: "string", maxLength: 63, pattern: DNS_LABEL };
const secretName = (what: string): Schema => ({
  type: "string",
  maxLength: 253,
  anyOf: [{ const: "" }, { pattern: DNS_SUBDOMAIN }],
  description: what,
});
const labelSelector: Schema = strict({
  matchLabels: stringMap,
  matchExpressions: {
    type: "array",
    items: strict(
      {
        key: { type: "string", minLength: 1 },
        operator: { enum: ["In", "NotIn", "Exists", "DoesNotExist"] },
        values: { type: "array", items: str },
      },
      { required: ["key", "operator"] },
    ),
  },
});
const toleration: Schema = strict({
  key: str,
  operator: { enum: ["Exists", "Equal"] },
  value: str,
  effect: { enum: ["", "NoSchedule", "PreferNoSchedule", "NoExecute"] },
  tolerationSeconds: { type: "integer" },
});
const quantity: Schema = { type: ["string", "number"] };
const resources: Schema = strict({
  requests: { type: "object", additionalProperties: quantity },
  limits: { type: "object", additionalProperties: quantity },
  claims: { type: "array" },
});
const placed = (more: Record<string, Schema> = {}): Schema =>
  strict({
    resources,
    nodeSelector: stringMap,
    tolerations: { type: "array", items: toleration },
    ...more,
  });
const budget: Schema = {
  anyOf: [
    { type: "null" },
    strict(
      {
        minAvailable: {
          anyOf: [
            { type: "integer", minimum: 0 },
            { type: "string", pattern: "^[0-9]+%$" },
          ],
        },
      },
      {
        required: ["minAvailable"],
      },
    ),
  ],
};

/** The pod config's input schema, as JSON Schema (zod 4), without its own $schema. */
export function podConfigSchema(): Schema {
  const { $schema: _, ...schema } = z.toJSONSchema(PodConfig, { io: "input", unrepresentable: "any" }) as Schema;
  return schema;
}

export function valuesSchema(): Schema {
  return strict(
    {
      images: strict(
        { controller: { type: "string", minLength: 1 }, companions: { type: "string", minLength: 1 } },
        { required: ["controller", "companions"] },
      ),
      placement: strict({ nodeSelector: stringMap, tolerations: { type: "array", items: toleration } }),
      sandboxNamespaces: {
        type: "array",
        minItems: 1,
        uniqueItems: true,
        items: { ...namespaceName, not: { enum: OWN_NAMESPACES } },
        description: "the namespaces that hold Sandboxes: DNS labels, never jr2's own",
      },
      admission: placed({
        defaults: { enum: ["auto", "policy", "webhook"] },
        replicas: { type: "integer", minimum: 1 },
        podDisruptionBudget: budget,
        // The admission certificate's source: typed where it is made (decision 0075).
        certificate: identitySchema(),
      }),
      watcher: placed(),
      orchestrator: placed({
        replicas: { type: "integer", minimum: 1 },
        podDisruptionBudget: budget,
        existingSecret: secretName("a Secret in jr2-system with keys signing-key and api-tokens"),
        apiTokens: { type: "array", items: { type: "string", minLength: 1 } },
        tls: strict({ secretName: secretName("a kubernetes.io/tls Secret in jr2-system") }),
        callers: strict({
          namespaces: { type: "array", items: namespaceName },
          podSelectors: {
            type: "array",
            items: strict(
              { namespace: namespaceName, matchLabels: { ...stringMap, minProperties: 1 } },
              { required: ["namespace", "matchLabels"] },
            ),
          },
          ingress: strict({ namespaceSelector: labelSelector, podSelector: labelSelector }),
        }),
      }),
      egress: placed({ replicas: { type: "integer", minimum: 1 }, podDisruptionBudget: budget }),
      cacheAgent: placed({ vouchedHosts: { type: "array", items: { type: "string", minLength: 1 } } }),
      podConfig: podConfigSchema(),
      fence: { type: "array", items: { type: "string", minLength: 1 } },
      monitoring: strict({
        namespaces: { type: "array", items: namespaceName },
        serviceMonitor: strict({
          enabled: { type: "boolean" },
          interval: { type: "string", pattern: "^([0-9]+(ms|s|m|h))+$" },
          labels: stringMap,
        }),
        prometheusRule: strict({ enabled: { type: "boolean" }, labels: stringMap }),
      }),
      preflight: strict({ enabled: { type: "boolean" } }),
    },
    { required: ["images", "sandboxNamespaces", "admission", "orchestrator"] },
  );
}
