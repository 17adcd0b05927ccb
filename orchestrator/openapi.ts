// `/v1/openapi.json`, generated from the very zod schemas the server validates with (api.ts), by
// zod 4's own JSON Schema writer (docs/decisions/0003). OpenAPI 3.1 takes JSON Schema 2020-12 as is.
import { z } from "zod";
import { Created, CreateWorkspaceBody, ErrorBody, WorkspaceEvent, WorkspaceList, WorkspaceView } from "./api";

type Json = Record<string, unknown>;

/** A component: request bodies as a client writes them (defaults optional), answers as written. */
function schemaOf(schema: z.ZodType, io: "input" | "output"): Json {
  const json = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" }) as Json;
  delete json.$schema;
  return json;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string) => ({ content: { "application/json": { schema: ref(name) } } });
const answer = (description: string, name: string) => ({ description, ...json(name) });
const error = (description: string) => answer(description, "Error");

const NAME_PARAM = {
  name: "name",
  in: "path",
  required: true,
  description: "The workspace's name.",
  schema: { type: "string" },
};

const COMMON_ERRORS = { "401": error("No valid bearer token.") };

export function openApiDocument(): Json {
  return {
    openapi: "3.1.0",
    info: {
      title: "jr2 Orchestrator API",
      version: "1",
      description:
        "Workspaces for Machines: a Sandbox placed, provisioned and attached, kept alive by its lease, and " +
        "reported lost when it dies. Every error is `{error: {code, message}}`.",
    },
    security: [{ bearer: [] }],
    paths: {
      "/v1/workspaces": {
        post: {
          summary: "Ask for a workspace",
          requestBody: { required: true, ...json("CreateWorkspaceBody") },
          responses: {
            "202": answer("Accepted: the workspace is being placed.", "Created"),
            "400": error("The body is invalid; the message names each field path."),
            "403": error("A repo url is outside the fence: no git.credentials entry admits it."),
            "413": error("The body exceeds 1 MiB."),
            "415": error("The body is not JSON."),
            ...COMMON_ERRORS,
          },
        },
        get: {
          summary: "List the workspaces",
          responses: { "200": answer("Every workspace.", "WorkspaceList"), ...COMMON_ERRORS },
        },
      },
      "/v1/workspaces/{name}": {
        parameters: [NAME_PARAM],
        get: {
          summary: "A workspace",
          responses: {
            "200": answer("The workspace.", "WorkspaceView"),
            "404": error("No such workspace."),
            ...COMMON_ERRORS,
          },
        },
        delete: {
          summary: "Destroy a workspace (its Sandbox is deleted)",
          responses: {
            "202": answer("Accepted: the workspace is being destroyed.", "Created"),
            "404": error("No such workspace."),
            ...COMMON_ERRORS,
          },
        },
      },
      "/v1/workspaces/{name}/events": {
        parameters: [NAME_PARAM],
        get: {
          summary: "The workspace's events as Server-Sent Events",
          description:
            "First a `snapshot` event (a WorkspaceView), then one event per transition, wait and renewal, named " +
            "by its `type`, with a WorkspaceEvent as data; `: keep-alive` comments while idle. The stream ends " +
            "after a final state (lost, failed, destroyed).",
          responses: {
            "200": {
              description: "The event stream.",
              content: { "text/event-stream": { schema: ref("WorkspaceEvent") } },
            },
            "404": error("No such workspace."),
            ...COMMON_ERRORS,
          },
        },
      },
      "/healthz": {
        get: {
          summary: "Liveness",
          security: [],
          responses: { "200": { description: "The Orchestrator serves." } },
        },
      },
      "/metrics": {
        get: {
          summary: "Prometheus metrics",
          responses: { "200": { description: "The metrics, in Prometheus's text format." }, ...COMMON_ERRORS },
        },
      },
      "/v1/openapi.json": {
        get: {
          summary: "This document",
          responses: { "200": { description: "The OpenAPI document." }, ...COMMON_ERRORS },
        },
      },
    },
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "An API token (JR2_API_TOKENS_FILE)." },
      },
      schemas: {
        CreateWorkspaceBody: schemaOf(CreateWorkspaceBody, "input"),
        Created: schemaOf(Created, "output"),
        WorkspaceView: schemaOf(WorkspaceView, "output"),
        WorkspaceList: schemaOf(WorkspaceList, "output"),
        WorkspaceEvent: schemaOf(WorkspaceEvent, "output"),
        Error: schemaOf(ErrorBody, "output"),
      },
    },
  };
}
