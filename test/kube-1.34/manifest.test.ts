// The manifest a 1.34 installation applies (decision 0059): the build's, with the Sandbox defaults
// as the module's webhook (scripts/webhooks.ts withSandboxDefaults, what JR2_SANDBOX_DEFAULTS=webhook
// renders), is accepted whole by the 1.34 API server; the default one is refused on the policy alone.
// Server-side dry runs, the webhook configurations under names of their own: an apply over the
// running module's (which point at its local URL) would merge the two endpoints into one object.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import cfg from "../../package.json";
import * as kubectl from "../../dev/kubectl";
import { ROOT } from "../../dev/local-operator";
import { withSandboxDefaults } from "../../scripts/webhooks";
import { REPO_CREDENTIALS_ROLE } from "../../api/wire";
import { applyBuiltHolds, createAsModule, deleteHolds, operatorPod, privileged } from "../support/module-holds";

type Obj = { kind: string; metadata: { name: string; namespace?: string } };
const MANIFEST = join(ROOT, "dist", `pepr-module-${cfg.pepr.uuid}.yaml`);
const built = () => parseAllDocuments(readFileSync(MANIFEST, "utf8")).map((d) => d.toJS() as Obj);
const kubeconfig = () => process.env.KUBECONFIG!;

const renamed = (d: Obj): Obj =>
  /WebhookConfiguration$/.test(d.kind) ? { ...d, metadata: { ...d.metadata, name: `${d.metadata.name}-manifest` } } : d;

/** A server-side dry run of the objects as one apply: its output, or its error. */
const dryRun = (objects: Obj[]) =>
  kubectl
    .run(
      kubeconfig(),
      [
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=jr2-manifest-test",
        "--dry-run=server",
        "-f",
        "-",
      ],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: objects.map(renamed) }),
    )
    .then(
      (out) => ({ out }),
      (err: Error) => ({ err: err.message }),
    );

beforeAll(async () => {
  // A dry run cannot place an object in a namespace it would create: the manifest's namespaces first.
  await kubectl.apply(
    kubeconfig(),
    built().filter((d) => d.kind === "Namespace"),
  );
});

describe("the manifest on Kubernetes 1.34", () => {
  it("is accepted whole with the defaults as the module's webhook", async () => {
    const objects = withSandboxDefaults(built(), "webhook");
    expect(objects.map((d) => d.kind)).toContain("MutatingWebhookConfiguration");
    expect(objects.map((d) => d.kind)).not.toContain("MutatingAdmissionPolicy");
    // The policies holding the module's own writes (decision 0069) are in it, and accepted.
    expect(objects.filter((d) => d.kind === "ValidatingAdmissionPolicy").map((d) => d.metadata.name)).toEqual([
      "jr2-module-pods",
      "jr2-module-roles",
      "jr2-sandbox-namespace-pods",
    ]);
    const answer = await dryRun(objects);
    expect(answer).toEqual({
      out: expect.stringContaining(
        `mutatingwebhookconfiguration.admissionregistration.k8s.io/pepr-${cfg.pepr.uuid}-manifest`,
      ),
    });
    // Every object of the manifest, each named once in the answer.
    expect((answer as { out: string }).out.trim().split("\n")).toHaveLength(objects.length);
  });

  it("is refused with the defaults as the policy, which 1.34 does not serve", async () => {
    const answer = await dryRun(withSandboxDefaults(built(), "policy"));
    expect(answer).toEqual({
      err: expect.stringMatching(/MutatingAdmissionPolicy|could not find the requested resource/),
    });
  });
});

// The module's own writes held by the API server (decision 0069): the built policies in CEL that a
// 1.34 API server compiles and runs (ValidatingAdmissionPolicy v1 is GA since 1.30).
describe("the module's policies on Kubernetes 1.34", () => {
  const ns = "jr2-module-holds";
  let holds: Obj[] = [];

  beforeAll(async () => {
    // This API server runs no controller manager: the namespace's default service account by hand.
    await kubectl.apply(kubeconfig(), [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: ns } },
    ]);
    holds = await applyBuiltHolds(kubeconfig(), ns);
  }, 60_000);

  afterAll(async () => {
    await deleteHolds(kubeconfig(), holds);
  });

  it("admits the operator's pod and refuses a privileged one and a hostPath outside the cache", async () => {
    expect(await createAsModule(kubeconfig(), operatorPod(ns))).toBe("admitted");
    expect(await createAsModule(kubeconfig(), privileged(operatorPod(ns)))).toMatch(
      /is never privileged; these containers do not: user/,
    );
    const host = operatorPod(ns);
    host.spec.volumes.find((v: { name: string }) => v.name === "repo-app").hostPath = { path: "/etc" };
    expect(await createAsModule(kubeconfig(), host)).toContain("repo-app (/etc)");
  });

  it("admits the Role as the operator writes it and refuses another verb", async () => {
    const role = (verbs: string[]) => ({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: REPO_CREDENTIALS_ROLE, namespace: ns },
      rules: [{ apiGroups: [""], resources: ["secrets"], verbs, resourceNames: ["cred-a"] }],
    });
    expect(await createAsModule(kubeconfig(), role(["get"]))).toBe("admitted");
    expect(await createAsModule(kubeconfig(), role(["get", "list"]))).toMatch(
      /jr2-module-roles.*grants only get on secrets by resourceNames/,
    );
  });
});
