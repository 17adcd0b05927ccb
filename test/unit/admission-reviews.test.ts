// The admission table (capabilities/admission/reviews.ts) and the module's review endpoint
// (review-server.ts): Pepr's bindings (capabilities/bindings.ts) are exactly the table's entries, a
// request is routed as Pepr's binding filters route it, and the endpoint answers a review over
// real HTTP with the table's verdict, refusing what it cannot read (decision 0028).
import { once } from "node:events";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { capabilities } from "../../capabilities/bindings";
import { REVIEWS, judge, reviewsFor, type ReviewRequest } from "../../capabilities/admission/reviews";
import { MAX_REVIEW_BYTES, reviewServer } from "../../capabilities/admission/review-server";
import { optedInNamespaces } from "../../capabilities/admission/namespaces";
import { OPERATOR_ENV } from "../../api/env";
import { SANDBOX_NAME_LABEL } from "../../api/wire";
import { rulesFromEnv, withDefaults } from "../../capabilities/rules/sandbox-rules";

const SANDBOX_KIND = { group: "core.jr2.dev", version: "v1alpha1", kind: "Sandbox" };
const POD_KIND = { group: "", version: "v1", kind: "Pod" };

const sandbox = (name: string, spec: Record<string, unknown>): ReviewRequest => ({
  uid: `uid-${name}`,
  kind: SANDBOX_KIND,
  operation: "CREATE",
  name,
  namespace: "team-a",
  object: { metadata: { name, namespace: "team-a" }, spec },
});
const GOOD = { image: "ghcr.io/example/harness:1" };

// Which namespaces opted in is a watch of the API server (capabilities/admission/namespaces.ts),
// which the integration tier runs; here `team-a` has, and `closed` has not.
beforeEach(() => {
  jest.spyOn(optedInNamespaces, "has").mockImplementation(async (ns) => ns !== "closed");
});
afterEach(() => jest.restoreAllMocks());

describe("the admission table", () => {
  it("is what Pepr binds: one validating binding per entry, same kind, events and label", () => {
    const [admission, ...rest] = capabilities({});
    expect(admission.name).toBe("admission");
    // Outside Pepr's build the other capabilities bind nothing: their watches are the module's own.
    expect(rest.map((c) => [c.name, c.bindings.length])).toEqual([
      ["sandbox", 0],
      ["repo", 0],
    ]);
    const bindings = admission.bindings.map((b) => ({
      group: b.kind.group,
      kind: b.kind.kind,
      event: b.event,
      labels: Object.keys(b.filters.labels),
      validates: typeof b.validateCallback === "function",
    }));
    const expected = REVIEWS.map((r) => ({
      group: r.group,
      kind: r.kind,
      event: r.operations.length === 2 ? "CREATEORUPDATE" : r.operations[0],
      labels: r.label ? [r.label] : [],
      validates: true,
    }));
    expect(bindings).toEqual(expected);
  });

  it("routes a request as Pepr's binding filters do", () => {
    const names = (req: ReviewRequest) => reviewsFor(req).map((r) => `${r.kind}:${r.operations.join("+")}`);
    const pod = (operation: string, labels?: Record<string, string>, namespace = "team-a"): ReviewRequest => ({
      uid: "u",
      kind: POD_KIND,
      operation,
      namespace,
      object: { metadata: { name: "p", namespace, labels } },
    });
    expect(names(sandbox("a", GOOD))).toEqual(["Sandbox:CREATE+UPDATE"]);
    expect(names({ ...sandbox("a", GOOD), operation: "UPDATE" })).toEqual(["Sandbox:CREATE+UPDATE"]);
    expect(names({ ...sandbox("a", GOOD), operation: "DELETE" })).toEqual([]);
    expect(names(pod("CREATE"))).toEqual([]);
    expect(names(pod("CREATE", { [SANDBOX_NAME_LABEL]: "a" }))).toEqual(["Pod:CREATE"]);
    expect(names(pod("UPDATE"))).toEqual(["Pod:UPDATE"]);
    expect(names(pod("CREATE", { [SANDBOX_NAME_LABEL]: "a" }, "kube-system"))).toEqual([]);
    expect(names({ ...pod("CREATE"), kind: { group: "apps", version: "v1", kind: "Deployment" } })).toEqual([]);
  });

  it("refuses a Sandbox that states something weaker, naming the field, and allows a plain one", async () => {
    expect(await judge(sandbox("plain", GOOD))).toEqual({ allowed: true });
    const v = await judge(sandbox("host", { ...GOOD, volumes: [{ name: "root", hostPath: { path: "/" } }] }));
    expect(v.allowed).toBe(false);
    expect(v.allowed === false && v.code).toBe(422);
    expect(v.allowed === false && v.message).toMatch(/^Sandbox team-a\/host refused: spec\.volumes\[0\]/);
  });

  // Decision 0048: a CONNECT is judged beside the table; one naming no credential holder is admitted
  // (the webhook's matchConditions keep most of these away; the refusals need the pod: integration).
  it("admits an exec or attach into a container that holds no credential without reading the pod", async () => {
    const connect = (subResource: string, container: string, namespace = "team-a"): ReviewRequest => ({
      uid: "u",
      kind: { group: "", version: "v1", kind: subResource === "exec" ? "PodExecOptions" : "PodAttachOptions" },
      resource: { group: "", version: "v1", resource: "pods" },
      subResource,
      operation: "CONNECT",
      name: "sbx",
      namespace,
      object: { container } as never,
    });
    expect(await judge(connect("exec", "harness"))).toEqual({ allowed: true });
    expect(await judge(connect("attach", "user"))).toEqual({ allowed: true });
    expect(await judge(connect("exec", "custodian", "kube-system"))).toEqual({ allowed: true });
  });

  // The integration tier's operator lowers the floor to 1s (its lease tests would wait minutes);
  // this process runs with the production default, as the deployed module does.
  it("holds the production idleTimeout floor of 1m when JR2_MIN_IDLE_TIMEOUT is unset", async () => {
    expect(process.env[OPERATOR_ENV.minIdleTimeout]).toBeUndefined();
    expect(rulesFromEnv({})).toEqual({ minIdleTimeoutMs: 60_000 });
    // What is not a duration leaves the floor where it is; nothing lowers it but a duration.
    expect(rulesFromEnv({ [OPERATOR_ENV.minIdleTimeout]: "soon" })).toEqual({ minIdleTimeoutMs: 60_000 });
    expect(await judge(sandbox("minute", { ...GOOD, idleTimeout: "1m" }))).toEqual({ allowed: true });
    for (const idleTimeout of ["59s", "1s"]) {
      const v = await judge(sandbox("short", { ...GOOD, idleTimeout }));
      expect([idleTimeout, v.allowed === false && v.code]).toEqual([idleTimeout, 422]);
      expect(v.allowed === false && v.message).toMatch(
        /^Sandbox team-a\/short refused: spec\.idleTimeout: .*between 1m and 168h/,
      );
    }
  });

  // Decision 0067: in every mode, not by the deployed module's RBAC alone.
  it("refuses a Sandbox created in a namespace that has not opted in, naming it and the fix; an update there passes", async () => {
    const outside = {
      ...sandbox("outside", GOOD),
      namespace: "closed",
      object: { metadata: { name: "outside", namespace: "closed" }, spec: GOOD },
    };
    const v = await judge(outside);
    expect(v.allowed === false && v.code).toBe(422);
    expect(v.allowed === false && v.message).toBe(
      'Sandbox closed/outside refused: metadata.namespace: namespace "closed" has not opted in to hold Sandboxes: ' +
        "create the Sandbox in an opted-in namespace, or opt this one in: list it in the installation's Sandbox " +
        "namespaces (JR2_SANDBOX_NAMESPACES at npm run build, which labels it jr2.dev/sandboxes=enabled and binds " +
        "the operator's role there) and apply the manifests again",
    );
    expect(await judge({ ...outside, operation: "UPDATE", oldObject: { spec: GOOD } })).toEqual({ allowed: true });
  });

  it("refuses a name that cannot name the Service at create, not at a later update", async () => {
    const v = await judge(sandbox("dotted.name", GOOD));
    expect(v.allowed === false && v.message).toMatch(/metadata\.name/);
    const update = { ...sandbox("dotted.name", GOOD), operation: "UPDATE", oldObject: { spec: GOOD } };
    expect(await judge(update)).toEqual({ allowed: true });
  });
});

// Decision 0066: a Repo's url is a network remote; a path would have every node's cache agent copy
// that directory of its disk (another namespace's cache) into the Repo's namespace. The unit tier
// runs without the local runners' JR2_LOCAL_REPO_ROOTS, as a cluster's module does.
describe("Repos", () => {
  const repo = (url: string, operation = "CREATE", oldUrl?: string): ReviewRequest => ({
    uid: "u",
    kind: { group: "core.jr2.dev", version: "v1alpha1", kind: "Repo" },
    operation,
    name: "stolen",
    namespace: "team-b",
    object: { metadata: { name: "stolen", namespace: "team-b" }, spec: { url } },
    ...(oldUrl ? { oldObject: { metadata: { name: "stolen", namespace: "team-b" }, spec: { url: oldUrl } } } : {}),
  });

  it("refuses a local url on create and on update, naming the Repo, spec.url and the fix", async () => {
    expect(process.env.JR2_LOCAL_REPO_ROOTS).toBeUndefined();
    for (const url of ["file:///var/lib/jr2/repos/team-a/app-0123456789", "/var/lib/jr2/repos/team-a/app-0123456789"]) {
      for (const r of [repo(url), repo(url, "UPDATE", "https://github.com/org/app.git")]) {
        const v = await judge(r);
        expect(v.allowed).toBe(false);
        if (v.allowed) continue;
        expect(v.code).toBe(422);
        expect(v.message).toMatch(/^Repo team-b\/stolen refused: spec\.url: is a local path/);
        expect(v.message).toContain("give the repository's network url");
        expect(v.message).not.toContain("/var/lib/jr2");
      }
    }
  });

  it("admits network urls", async () => {
    for (const url of ["https://github.com/org/app.git", "git@github.com:org/app.git", "git://git.example.com/a.git"])
      expect(await judge(repo(url))).toEqual({ allowed: true });
  });
});

describe("the review endpoint", () => {
  let server: Server;
  let port: number;
  const passedOn: string[] = [];

  beforeAll(async () => {
    server = createServer(
      reviewServer("secret-path", (req, res) => {
        passedOn.push(`${req.method} ${req.url}`);
        res.end("pepr");
      }),
    ).listen(0, "127.0.0.1");
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise((done) => server.close(done)));

  const post = (path: string, body: string | Buffer) =>
    new Promise<{ status: number; body: string; connection?: string }>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, path, method: "POST" }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            connection: res.headers.connection,
          }),
        );
      });
      req.on("error", reject);
      req.end(body);
    });
  const review = (r: ReviewRequest) =>
    JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: r });

  it("answers a review with the table's verdict and the request's uid", async () => {
    // As the API server calls it: its timeout rides in the query.
    const ok = await post("/validate/secret-path?timeout=10s", review(sandbox("plain", GOOD)));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual({
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      response: { uid: "uid-plain", allowed: true },
    });
    const bad = await post(
      "/validate/secret-path",
      review(sandbox("priv", { ...GOOD, securityContext: { privileged: true } })),
    );
    const { response } = JSON.parse(bad.body);
    expect(response).toMatchObject({ uid: "uid-priv", allowed: false, status: { code: 422 } });
    expect(response.status.message).toMatch(/^Sandbox team-a\/priv refused: /);
  });

  it("allows what no review takes, as Pepr does", async () => {
    const other = { uid: "u-cm", kind: { group: "", version: "v1", kind: "ConfigMap" }, operation: "CREATE" };
    expect(JSON.parse((await post("/validate/secret-path", review(other as ReviewRequest))).body).response).toEqual({
      uid: "u-cm",
      allowed: true,
    });
  });

  it("refuses what it cannot read with a 4xx, so the API server's failure policy refuses the request", async () => {
    const notJson = await post("/validate/secret-path", "{");
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatch(/not JSON/);
    const noRequest = await post("/validate/secret-path", JSON.stringify({ kind: "AdmissionReview" }));
    expect(noRequest.status).toBe(400);
    expect(noRequest.body).toMatch(/request\.uid/);
    const huge = await post("/validate/secret-path", Buffer.alloc(MAX_REVIEW_BYTES + 1, 32));
    expect(huge.status).toBe(413);
    expect(huge.connection).toBe("close");
  });

  // Decision 0059: where the installation registers the defaults as the module's webhook.
  it("answers a mutating review with withDefaults of the Sandbox as a JSON Patch, and none when it is defaulted", async () => {
    const answer = JSON.parse((await post("/mutate/secret-path?timeout=10s", review(sandbox("plain", GOOD)))).body);
    expect(answer.response).toMatchObject({ uid: "uid-plain", allowed: true, patchType: "JSONPatch" });
    expect(JSON.parse(Buffer.from(answer.response.patch, "base64").toString())).toEqual([
      { op: "replace", path: "/spec", value: withDefaults(GOOD) },
    ]);
    const again = JSON.parse((await post("/mutate/secret-path", review(sandbox("plain", withDefaults(GOOD))))).body);
    expect(again.response).toEqual({ uid: "uid-plain", allowed: true });
  });

  it("passes everything else on to Pepr's server: another path, another method", async () => {
    passedOn.length = 0;
    await post("/validate/wrong-path", review(sandbox("plain", GOOD)));
    await post("/mutate/wrong-path", review(sandbox("plain", GOOD)));
    await new Promise((resolve) => request({ host: "127.0.0.1", port, path: "/healthz" }, resolve).end());
    expect(passedOn).toEqual(["POST /validate/wrong-path", "POST /mutate/wrong-path", "GET /healthz"]);
  });
});
