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
