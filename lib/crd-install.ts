// Applies the module's CRDs (server-side apply) and waits until the API server serves them, so
// `npx pepr deploy` alone yields a working operator: Pepr does not install CRDs itself, and a
// watch on a kind the server does not serve yet fails (docs/decisions/0003). Deployed, the module
// may only get and patch its own CRDs by name (decision 0047): the manifest and the chart create
// them, and the apply here is a patch; only a run with wider rights (locally, system:masters)
// creates one that is missing.
import { K8s, kind } from "kubernetes-fluent-client";
import { crds, type CustomResourceDefinition } from "../api/crd/definitions";

const ESTABLISH_TIMEOUT_MS = 60_000;

export async function installCRDs(log: (msg: string) => void = () => {}): Promise<void> {
  for (const crd of crds()) {
    // force: this module owns its CRDs' schema; an older copy applied by hand is taken over.
    try {
      await K8s(kind.CustomResourceDefinition).Apply(crd as unknown as kind.CustomResourceDefinition, { force: true });
    } catch (err) {
      throw crdRefusal(crd.metadata.name, err);
    }
    await waitEstablished(crd);
    log(`CRD ${crd.metadata.name} applied and established`);
  }
}

async function waitEstablished(crd: CustomResourceDefinition): Promise<void> {
  const deadline = Date.now() + ESTABLISH_TIMEOUT_MS;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    const live = await K8s(kind.CustomResourceDefinition).Get(crd.metadata.name);
    const established = live.status?.conditions?.find((c) => c.type === "Established");
    if (established?.status === "True") return;
    if (Date.now() > deadline) {
      throw new Error(
        `CRD ${crd.metadata.name} not Established after ${ESTABLISH_TIMEOUT_MS / 1000}s: ` +
          `${established?.reason ?? "no condition"} ${established?.message ?? ""}`.trim(),
      );
    }
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** A refused apply of a CRD, named with its fix: a 403 means the CRD is missing and this module
 * may not create it (decision 0047). Pure. */
export function crdRefusal(name: string, err: unknown): Error {
  const status = (err as { status?: number })?.status;
  if (status !== 403) return err instanceof Error ? err : new Error(String(err));
  return new Error(
    `CRD ${name} could not be applied (403 Forbidden): the deployed module may only patch its CRDs, ` +
      "not create them. Apply them first: kubectl apply -f dist/crds/ (the built manifest and the " +
      "Helm chart carry them)",
  );
}
