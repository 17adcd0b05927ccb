// The whole installation's chart on Kubernetes 1.34 with its defaults (decision 0074): rendered for
// this API server's version, `admission.defaults: auto` chooses the module's webhook (1.34 serves no
// MutatingAdmissionPolicy v1), and every object of the render is accepted by the 1.34 API server.
// Server-side dry runs, the webhook configurations under names of their own (as manifest.test.ts:
// an apply over the running module's would merge two endpoints into one object); the namespaces
// applied first, since a dry run cannot place an object in a namespace it would create.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import * as kubectl from "../../dev/kubectl";
import { INSTALL_RELEASE, helmBin } from "../../dev/helm";
import { ROOT } from "../../dev/local-operator";
import { CHART_NAME } from "../../scripts/helm-chart";

type Obj = { kind: string; metadata: { name: string; namespace?: string } };
const CHART = join(ROOT, "dist", `${CHART_NAME}-chart`);
const kubeconfig = () => process.env.KUBECONFIG!;

const renamed = (d: Obj): Obj =>
  /WebhookConfiguration$/.test(d.kind) ? { ...d, metadata: { ...d.metadata, name: `${d.metadata.name}-chart` } } : d;

describe("the chart on Kubernetes 1.34 with its defaults", () => {
  let objects: Obj[] = [];
  let version = "";

  beforeAll(async () => {
    version = JSON.parse(await kubectl.run(kubeconfig(), ["version", "-o", "json"])).serverVersion.gitVersion;
    const text = execFileSync(helmBin(), ["template", INSTALL_RELEASE, CHART, "--kube-version", version], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    objects = parseAllDocuments(text)
      .map((d) => d.toJS() as Obj)
      .filter(Boolean);
    await kubectl.apply(
      kubeconfig(),
      objects.filter((d) => d.kind === "Namespace"),
    );
  }, 120_000);

  it("is rendered for this server's 1.34 with the Sandbox defaults as the module's webhook", () => {
    expect(version).toMatch(/^v1\.34\./);
    const kinds = objects.map((d) => d.kind);
    expect(kinds).toContain("MutatingWebhookConfiguration");
    expect(kinds).not.toContain("MutatingAdmissionPolicy");
    expect(kinds).not.toContain("MutatingAdmissionPolicyBinding");
  });

  it("is accepted whole by the 1.34 API server", async () => {
    const out = await kubectl.run(
      kubeconfig(),
      ["apply", "--server-side", "--force-conflicts", "--field-manager=jr2-chart-test", "--dry-run=server", "-f", "-"],
      JSON.stringify({ apiVersion: "v1", kind: "List", items: objects.map(renamed) }),
    );
    // Every object of the render, each named once in the answer.
    expect(out.trim().split("\n")).toHaveLength(objects.length);
    expect(out).toContain(`mutatingwebhookconfiguration.admissionregistration.k8s.io/`);
  }, 120_000);
});
