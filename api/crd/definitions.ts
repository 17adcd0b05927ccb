// The two CustomResourceDefinitions, built from the zod sources (pure). scripts/gen-crds.ts writes
// them to generated/*.yaml; install.ts applies them; a unit test fails when the two drift.
import type { z } from "zod";
import { crdSchemaOf, type JSONSchemaProps } from "./openapi";
import { GROUP, VERSION } from "./sources/common";
import { Repo } from "./sources/repo";
import { Sandbox } from "./sources/sandbox";

export type PrinterColumn = { name: string; type: string; jsonPath: string; description?: string; priority?: number };

export type CustomResourceDefinition = {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames: string[];
      categories: string[];
    };
    scope: "Namespaced";
    versions: {
      name: string;
      served: true;
      storage: true;
      subresources: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      schema: { openAPIV3Schema: JSONSchemaProps };
    }[];
  };
};

type Kind = {
  kind: string;
  plural: string;
  shortName: string;
  schema: z.ZodType;
  columns: PrinterColumn[];
};

export const SANDBOX_KIND: Kind = {
  kind: "Sandbox",
  plural: "sandboxes",
  shortName: "sbx",
  schema: Sandbox,
  columns: [
    { name: "Phase", type: "string", jsonPath: ".status.phase", description: "Pending, Ready, Lost or Terminating" },
    { name: "Node", type: "string", jsonPath: ".status.nodeName", description: "The node the pod runs on" },
    { name: "Endpoint", type: "string", jsonPath: ".status.endpoint", description: "The Harness's address" },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};

export const REPO_KIND: Kind = {
  kind: "Repo",
  plural: "repos",
  shortName: "repo",
  schema: Repo,
  columns: [
    { name: "URL", type: "string", jsonPath: ".spec.url", description: "The repository's url" },
    { name: "Present", type: "integer", jsonPath: ".status.present", description: "Nodes holding a present cache" },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};

export function crdFor(k: Kind): CustomResourceDefinition {
  const schema = crdSchemaOf(k.schema);
  // apiVersion, kind and metadata are the API server's to describe; a CRD states only spec and status.
  const { apiVersion: _a, kind: _k, metadata: _m, ...properties } = schema.properties ?? {};
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${k.plural}.${GROUP}`, labels: { "app.kubernetes.io/managed-by": "jr2-operator" } },
    spec: {
      group: GROUP,
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.kind.toLowerCase(),
        shortNames: [k.shortName],
        categories: ["jr2"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: k.columns,
          schema: { openAPIV3Schema: { ...schema, properties } },
        },
      ],
    },
  };
}

/** Both CRDs, Sandbox first. */
export const crds = (): CustomResourceDefinition[] => [crdFor(SANDBOX_KIND), crdFor(REPO_KIND)];
