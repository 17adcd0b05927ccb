// A pooled client for the operator's hot path. kubernetes-fluent-client re-reads the kubeconfig
// and builds a new HTTPS agent (a new TLS handshake, a socket kept open for ten minutes) on every
// call: at a burst of Sandboxes that costs seconds of latency and hundreds of MB. Here the config
// is read once, credentials are refreshed every minute (bound service-account tokens rotate), and
// one undici Agent keeps connections alive (docs/decisions/0008-pooled-api-client.md).
// Watches stay on kubernetes-fluent-client, through Pepr.
import { Readable } from "node:stream";
import { KubeConfig } from "@kubernetes/client-node";
import type { RequestOptions } from "node:https";
import { Agent, request } from "undici";
import { ApiError } from "./api-error";
import { API_HTTP2_ENV } from "../api/env";
import { API_VERSION } from "../api/crd/sources/common";

const CREDENTIAL_TTL_MS = 60_000;

type Session = { server: string; agent: Agent; headers: Record<string, string>; at: number };

let session: Promise<Session> | undefined;

async function open(previous?: Session): Promise<Session> {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("no current cluster in the kubeconfig (KUBECONFIG, ~/.kube/config or in-cluster)");
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.headers ?? {})) if (typeof v === "string") headers[k] = v;
  const agent = previous?.agent ?? newAgent(cluster.skipTLSVerify, opts);
  return { server: cluster.server.replace(/\/$/, ""), agent, headers, at: Date.now() };
}

/** Streams one HTTP/2 connection carries at once: below what the API server allows (Go's 250 or more). */
const H2_STREAMS = 100;

/**
 * JR2_API_HTTP2=1: a burst multiplexes on one connection instead of opening one TLS connection
 * per request in flight. undici needs two things for that: `pipelining` (its default, 1, lets a
 * connection carry one request at a time, HTTP/2 or not) and each request marked idempotent (see
 * kubeRequest). The Orchestrator turns it on; the operator stays on HTTP/1.1 (decision 0033).
 */
function newAgent(skipTLSVerify: boolean | undefined, opts: RequestOptions): Agent {
  const h2 = process.env[API_HTTP2_ENV] === "1";
  return new Agent({
    keepAliveTimeout: 30_000,
    allowH2: h2,
    ...(h2 ? { pipelining: H2_STREAMS } : {}),
    connect: {
      ca: opts.ca as string | undefined,
      cert: opts.cert as string | undefined,
      key: opts.key as string | undefined,
      rejectUnauthorized: !skipTLSVerify,
    },
  });
}

async function current(): Promise<Session> {
  const s = await (session ??= open());
  if (Date.now() - s.at > CREDENTIAL_TTL_MS) session = open(s);
  return session;
}

export type Method = "GET" | "POST" | "PATCH" | "DELETE";

/**
 * One API call; a non-2xx answer is thrown as an ApiError with the server's Status words. A DELETE
 * takes most options in the query (`?propagationPolicy=Background`); its body (DeleteOptions, for
 * preconditions the query cannot carry) is streamed: over HTTP/2 undici refuses a buffer body on a
 * method that does not expect one ("buffer body must have content length").
 */
export async function kubeRequest<T>(
  method: Method,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<T> {
  const s = await current();
  const res = await request(s.server + path, {
    method,
    dispatcher: s.agent,
    // undici starts a request it may not repeat (POST, PATCH) only on an idle connection, since a
    // connection lost under it could not be retried. Nothing here retries a request: a failed one
    // is its caller's to retry (the work queue) or to report, so each may share the connection.
    idempotent: true,
    headers: {
      ...s.headers,
      accept: "application/json",
      "user-agent": "jr2-operator",
      ...(body !== undefined ? { "content-type": contentType } : {}),
    },
    body:
      body === undefined
        ? undefined
        : method === "DELETE"
          ? Readable.from([JSON.stringify(body)])
          : JSON.stringify(body),
  });
  const text = await res.body.text();
  if (res.statusCode >= 200 && res.statusCode < 300) return (text ? JSON.parse(text) : undefined) as T;
  let status: { reason?: string; message?: string } = {};
  try {
    status = JSON.parse(text);
  } catch {
    status = { message: text };
  }
  throw new ApiError(res.statusCode, status.reason ?? `HTTP${res.statusCode}`, status.message ?? text);
}

/**
 * One path segment, encoded. URL parsing resolves a "." or ".." segment (even encoded), so such a
 * name would reach another path: no Kubernetes object is named so, and none is sent.
 */
function enc(segment: string): string {
  if (segment === "" || segment === "." || segment === "..") {
    throw new Error(`${JSON.stringify(segment)} is not a Kubernetes name: refused as a path segment`);
  }
  return encodeURIComponent(segment);
}

/** A server-side apply of `body` at `path` (the object's own path) by `fieldManager`, taking over
 * the fields it names: a re-apply of the same object changes nothing. */
export function applyRequest<T>(path: string, body: unknown, fieldManager: string): Promise<T> {
  return kubeRequest<T>(
    "PATCH",
    `${path}?fieldManager=${encodeURIComponent(fieldManager)}&force=true`,
    body,
    "application/apply-patch+yaml",
  );
}

/** The namespaced path prefix of jr2's own kinds, from the one API version (api/crd). */
const jr2 = (ns: string) => `/apis/${API_VERSION}/namespaces/${enc(ns)}`;

/** Paths of the objects the operator writes. */
export const paths = {
  namespace: (name: string) => `/api/v1/namespaces/${enc(name)}`,
  pods: (ns: string) => `/api/v1/namespaces/${enc(ns)}/pods`,
  pod: (ns: string, name: string) => `/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}`,
  services: (ns: string) => `/api/v1/namespaces/${enc(ns)}/services`,
  service: (ns: string, name: string) => `/api/v1/namespaces/${enc(ns)}/services/${enc(name)}`,
  events: (ns: string) => `/api/v1/namespaces/${enc(ns)}/events`,
  networkPolicy: (ns: string, name: string) =>
    `/apis/networking.k8s.io/v1/namespaces/${enc(ns)}/networkpolicies/${enc(name)}`,
  sandboxes: (ns: string) => `${jr2(ns)}/sandboxes`,
  sandbox: (ns: string, name: string) => `${jr2(ns)}/sandboxes/${enc(name)}`,
  repos: (ns: string) => `${jr2(ns)}/repos`,
  repoStatus: (ns: string, name: string) => `${jr2(ns)}/repos/${enc(name)}/status`,
  sandboxStatus: (ns: string, name: string) => `${jr2(ns)}/sandboxes/${enc(name)}/status`,
  roles: (ns: string) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${enc(ns)}/roles`,
  role: (ns: string, name: string) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${enc(ns)}/roles/${enc(name)}`,
};
