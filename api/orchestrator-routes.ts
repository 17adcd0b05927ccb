// The Orchestrator's HTTP routes, once: the server's router, the OpenAPI document's paths, the
// typed client's paths and the Harness's pick client all read this table (decision 0036). It lives
// in api/ because the Harness-facing routes are words on the wire between two workloads.

export type Method = "GET" | "HEAD" | "POST" | "PUT" | "DELETE";

/** Who may call a route: nobody in particular, a Machine (an API token), or a Sandbox (the Sandbox
 * token of the conversation's workspace, which its Custodian adds). */
export type Auth = "none" | "api" | "sandbox";

/** A path parameter: one segment, percent-decoded. */
export type Param = "name" | "iid" | "deliveryId" | "effectId";

/** What each route is about: the OpenAPI document's tags (each operation has its route's), and
 * what each tag says there. The `sandbox` routes are a Harness's, through its Custodian: they are
 * left out of the public document and the public clients (decision 0077). */
export const TAGS = {
  workspaces: "Workspaces: created, read, followed and destroyed.",
  egress: "A workspace's egress list and the egress point's log of its connections (decision 0051).",
  turns: "An Agent's turns: submitted, followed as Server-Sent Events, aborted; its Allowed picks.",
  picks: "The Menu picks an Agent waits on, and a Machine's answers.",
  effects: "A Machine's Effects, run by the workspace's Effector at most once (decision 0071).",
  sandbox: "A Harness's routes, called through its Custodian with the Sandbox token: not for a Machine.",
  service: "The Orchestrator itself: health, metrics, this document.",
} as const;
export type Tag = keyof typeof TAGS;

export type Route = { readonly method: Method; readonly path: string; readonly auth: Auth; readonly tag: Tag };

/** Every route, in the order the OpenAPI documents list them; its id is its operationId. */
export const ROUTES = {
  createWorkspace: { method: "POST", path: "/v1/workspaces", auth: "api", tag: "workspaces" },
  listWorkspaces: { method: "GET", path: "/v1/workspaces", auth: "api", tag: "workspaces" },
  getWorkspace: { method: "GET", path: "/v1/workspaces/{name}", auth: "api", tag: "workspaces" },
  deleteWorkspace: { method: "DELETE", path: "/v1/workspaces/{name}", auth: "api", tag: "workspaces" },
  workspaceEvents: { method: "GET", path: "/v1/workspaces/{name}/events", auth: "api", tag: "workspaces" },
  getEgress: { method: "GET", path: "/v1/workspaces/{name}/egress", auth: "api", tag: "egress" },
  setEgress: { method: "PUT", path: "/v1/workspaces/{name}/egress", auth: "api", tag: "egress" },
  egressLog: { method: "GET", path: "/v1/workspaces/{name}/egress/log", auth: "api", tag: "egress" },
  submitTurn: { method: "POST", path: "/v1/workspaces/{name}/turns", auth: "api", tag: "turns" },
  turnEvents: { method: "GET", path: "/v1/workspaces/{name}/turns/{iid}/events", auth: "api", tag: "turns" },
  abortTurn: { method: "POST", path: "/v1/workspaces/{name}/turns/{iid}/abort", auth: "api", tag: "turns" },
  setAllowed: { method: "PUT", path: "/v1/workspaces/{name}/turns/{iid}/allowed", auth: "api", tag: "turns" },
  listPicks: { method: "GET", path: "/v1/workspaces/{name}/picks", auth: "api", tag: "picks" },
  answerPick: { method: "POST", path: "/v1/workspaces/{name}/picks/{deliveryId}/answer", auth: "api", tag: "picks" },
  createEffect: { method: "POST", path: "/v1/workspaces/{name}/effects", auth: "api", tag: "effects" },
  listEffects: { method: "GET", path: "/v1/workspaces/{name}/effects", auth: "api", tag: "effects" },
  getEffect: { method: "GET", path: "/v1/workspaces/{name}/effects/{effectId}", auth: "api", tag: "effects" },
  takePick: { method: "POST", path: "/v1/sandbox/agents/{iid}/picks", auth: "sandbox", tag: "sandbox" },
  readAllowed: { method: "GET", path: "/v1/sandbox/agents/{iid}/allowed", auth: "sandbox", tag: "sandbox" },
  readDelivery: {
    method: "GET",
    path: "/v1/sandbox/agents/{iid}/deliveries/{deliveryId}",
    auth: "sandbox",
    tag: "sandbox",
  },
  healthz: { method: "GET", path: "/healthz", auth: "none", tag: "service" },
  healthzHead: { method: "HEAD", path: "/healthz", auth: "none", tag: "service" },
  metrics: { method: "GET", path: "/metrics", auth: "api", tag: "service" },
  openapi: { method: "GET", path: "/v1/openapi.json", auth: "api", tag: "service" },
} as const satisfies Record<string, Route>;

export type RouteId = keyof typeof ROUTES;

/** A Harness's route (a Sandbox token's): out of the public document and clients (decision 0077). */
export const isInternal = (id: RouteId): boolean => ROUTES[id].auth === "sandbox";

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
