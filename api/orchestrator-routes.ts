// The Orchestrator's HTTP routes, once: the server's router, the OpenAPI document's paths, the
// typed client's paths and the Harness's pick client all read this table (decision 0036). It lives
// in api/ because the Harness-facing routes are words on the wire between two workloads.

export type Method = "GET" | "HEAD" | "POST" | "PUT" | "DELETE";

/** Who may call a route: nobody in particular, a Machine (an API token), or a Sandbox (the Sandbox
 * token of the conversation's workspace, which its Custodian adds). */
export type Auth = "none" | "api" | "sandbox";

/** A path parameter: one segment, percent-decoded. */
export type Param = "name" | "iid" | "deliveryId" | "effectId";

export type Route = { readonly method: Method; readonly path: string; readonly auth: Auth };

/** Every route, in the order the OpenAPI document lists them. */
export const ROUTES = {
  createWorkspace: { method: "POST", path: "/v1/workspaces", auth: "api" },
  listWorkspaces: { method: "GET", path: "/v1/workspaces", auth: "api" },
  getWorkspace: { method: "GET", path: "/v1/workspaces/{name}", auth: "api" },
  deleteWorkspace: { method: "DELETE", path: "/v1/workspaces/{name}", auth: "api" },
  workspaceEvents: { method: "GET", path: "/v1/workspaces/{name}/events", auth: "api" },
  getEgress: { method: "GET", path: "/v1/workspaces/{name}/egress", auth: "api" },
  setEgress: { method: "PUT", path: "/v1/workspaces/{name}/egress", auth: "api" },
  egressLog: { method: "GET", path: "/v1/workspaces/{name}/egress/log", auth: "api" },
  submitTurn: { method: "POST", path: "/v1/workspaces/{name}/turns", auth: "api" },
  turnEvents: { method: "GET", path: "/v1/workspaces/{name}/turns/{iid}/events", auth: "api" },
  abortTurn: { method: "POST", path: "/v1/workspaces/{name}/turns/{iid}/abort", auth: "api" },
  setAllowed: { method: "PUT", path: "/v1/workspaces/{name}/turns/{iid}/allowed", auth: "api" },
  listPicks: { method: "GET", path: "/v1/workspaces/{name}/picks", auth: "api" },
  answerPick: { method: "POST", path: "/v1/workspaces/{name}/picks/{deliveryId}/answer", auth: "api" },
  createEffect: { method: "POST", path: "/v1/workspaces/{name}/effects", auth: "api" },
  listEffects: { method: "GET", path: "/v1/workspaces/{name}/effects", auth: "api" },
  getEffect: { method: "GET", path: "/v1/workspaces/{name}/effects/{effectId}", auth: "api" },
  takePick: { method: "POST", path: "/v1/sandbox/agents/{iid}/picks", auth: "sandbox" },
  readAllowed: { method: "GET", path: "/v1/sandbox/agents/{iid}/allowed", auth: "sandbox" },
  readDelivery: { method: "GET", path: "/v1/sandbox/agents/{iid}/deliveries/{deliveryId}", auth: "sandbox" },
  healthz: { method: "GET", path: "/healthz", auth: "none" },
  healthzHead: { method: "HEAD", path: "/healthz", auth: "none" },
  metrics: { method: "GET", path: "/metrics", auth: "api" },
  openapi: { method: "GET", path: "/v1/openapi.json", auth: "api" },
} as const satisfies Record<string, Route>;

export type RouteId = keyof typeof ROUTES;

/** The parameters a path template names, as a type: `"/a/{name}/b/{iid}"` gives `"name" | "iid"`. */
type ParamsOf<P extends string> = P extends `${string}{${infer K}}${infer Rest}` ? K | ParamsOf<Rest> : never;
export type ParamsFor<R extends RouteId> = { [K in ParamsOf<(typeof ROUTES)[R]["path"]>]: string };

/** A route's path with its parameters filled in, each percent-encoded. */
export function pathFor<R extends RouteId>(id: R, params: ParamsFor<R>): string {
  return ROUTES[id].path.replace(/\{(\w+)\}/g, (_, k: string) =>
    encodeURIComponent((params as Record<string, string>)[k]),
  );
}

/** The parameters a template names, in order. */
export const paramsOf = (template: string): Param[] => [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as Param);

/** One path template and the routes (methods) it serves, in table order. */
export type PathEntry = { template: string; auth: Auth; routes: Array<{ id: RouteId; method: Method }> };

/** The table grouped by path template, in the order each template first appears. */
export const PATHS: readonly PathEntry[] = (() => {
  const byTemplate = new Map<string, PathEntry>();
  for (const [id, r] of Object.entries(ROUTES) as Array<[RouteId, Route]>) {
    const entry = byTemplate.get(r.path) ?? { template: r.path, auth: r.auth, routes: [] };
    if (entry.auth !== r.auth) throw new Error(`${r.path}: every method of one path has the same auth`);
    entry.routes.push({ id, method: r.method });
    byTemplate.set(r.path, entry);
  }
  return [...byTemplate.values()];
})();

export type PathMatch = { entry: PathEntry; raw: Record<string, string> };

/**
 * The template a request path names, with each parameter's raw (still encoded) segment; one
 * trailing slash is allowed. Undefined when no template has this shape.
 */
export function matchPath(path: string): PathMatch | undefined {
  const segments = (path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path).split("/");
  for (const entry of PATHS) {
    const parts = entry.template.split("/");
    if (parts.length !== segments.length) continue;
    const raw: Record<string, string> = {};
    let ok = true;
    for (let i = 0; i < parts.length && ok; i++) {
      const p = /^\{(\w+)\}$/.exec(parts[i]);
      if (p) {
        if (segments[i] === "") ok = false;
        else raw[p[1]] = segments[i];
      } else ok = parts[i] === segments[i];
    }
    if (ok) return { entry, raw };
  }
  return undefined;
}

/** A path segment decoded, or undefined when it cannot be (bad escape, empty, or a `/` inside). */
export function segmentOf(segment: string): string | undefined {
  try {
    const text = decodeURIComponent(segment);
    return text && !text.includes("/") ? text : undefined;
  } catch {
    return undefined;
  }
}
