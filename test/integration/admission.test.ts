// Admission through the real API server and the running module: hostile Sandboxes refused with
// their field paths, defaults written into the stored object, the spec immutable, hand-made
// Sandbox pods refused, ephemeral containers kept away from the credential holders, and no exec or
// attach into them (decision 0048), whoever asks.
import { execFile } from "node:child_process";
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { kubectlPath } from "../../dev/kubectl";
import { DEPLOYED_OPERATOR } from "../../scripts/webhooks";
import { kubeRequest, paths } from "../../lib/kube";
import { type LabelSelector, selectorString } from "../support/label-selector";

type Obj = { metadata: { name: string } };
import { createSandbox, getSandbox, listPods, useNamespace, waitPhase } from "./support/cluster";

const ns = useNamespace("admission");

/** kubectl with the test's stdin; resolves with {code, out} (stdout and stderr together). */
function kubectl(args: string[], input?: object): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(kubectlPath(), args, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
    child.stdin!.end(input ? JSON.stringify(input) : "");
  });
}

const sandbox = (name: string, spec: object) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace: ns.name },
  spec: { image: "ghcr.io/example/harness:1", ...spec },
});

describe("admission of Sandboxes", () => {
  it("refuses a hostile Sandbox, naming every field path and its fix", async () => {
    const { code, out } = await kubectl(
      ["apply", "-f", "-"],
      sandbox("hostile", {
        sidecars: [
          { name: "custodian", image: "c", securityContext: { privileged: true, runAsNonRoot: true } },
          { name: "helper", image: "h", securityContext: { allowPrivilegeEscalation: true } },
        ],
        volumes: [{ name: "root", hostPath: { path: "/" } }],
        gitCredentials: [{ name: "push-token" }],
      }),
    );
    expect(code).not.toBe(0);
    expect(out).toContain(`Sandbox ${ns.name}/hostile refused`);
    expect(out).toContain("spec.sidecars[0].securityContext.privileged: must not be true");
    expect(out).toContain(
      'spec.sidecars[1].securityContext.allowPrivilegeEscalation: must be false for a jr2-owned container (only the "user" container may run as root)',
    );
    expect(out).toContain("spec.volumes[0].hostPath: is not allowed");
    expect(out).toContain('spec.gitCredentials: needs a sidecar named "effector"');
    await expect(getSandbox(ns.name, "hostile")).rejects.toMatchObject({ status: 404 });
  });

  it("refuses an Effector's volume or its Secret in the Harness or the user seat, naming the field and the fix (decision 0070)", async () => {
    const secretVolume = {
      name: "effector-secret-0",
      projected: {
        defaultMode: 0o400,
        sources: [{ secret: { name: "forge", items: [{ key: "token", path: "token" }] } }],
      },
    };
    const effector = {
      name: "effector",
      image: "e",
      volumeMounts: [{ name: "effector-secret-0", mountPath: "/run/jr2/secrets/forge/", readOnly: true }],
    };
    const { code, out } = await kubectl(
      ["apply", "-f", "-"],
      sandbox("effector-stolen", {
        volumes: [secretVolume, { name: "mine", secret: { secretName: "forge" } }],
        volumeMounts: [{ name: "effector-secret-0", mountPath: "/stolen", readOnly: true }],
        sidecars: [{ name: "user", image: "u", volumeMounts: [{ name: "mine", mountPath: "/mine" }] }, effector],
      }),
    );
    expect(code).not.toBe(0);
    expect(out).toContain(
      'spec.volumeMounts[0]: mounts "effector-secret-0", one of the Effector\'s volumes (its key, scratch, effect ' +
        'secrets or trust bundle): only the "effector" container may (decision 0070): remove it from this container',
    );
    expect(out).toContain(
      'spec.sidecars[0].volumeMounts[0]: reaches Secret "forge", which the Effector\'s volumes carry: only the "effector" container may',
    );
    await expect(getSandbox(ns.name, "effector-stolen")).rejects.toMatchObject({ status: 404 });
    // The effector's own: admitted.
    await createSandbox(ns.name, "effector-own", { volumes: [secretVolume], sidecars: [effector] });
    expect((await getSandbox(ns.name, "effector-own")).spec?.volumes?.[0].name).toBe("effector-secret-0");
  });

  it("stores a plain Sandbox with the defaults visible", async () => {
    await createSandbox(ns.name, "plain", {
      sidecars: [
        { name: "custodian", image: "c" },
        { name: "user", image: "u" },
        { name: "effector", image: "e" },
      ],
    });
    const stored = await getSandbox(ns.name, "plain");
    const hardened = {
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    };
    expect(stored.spec?.securityContext).toEqual(hardened);
    expect(stored.spec?.sidecars?.[0].securityContext).toEqual(hardened);
    // The user seat's one default (decision 0048): NET_RAW dropped, nothing else written.
    expect(stored.spec?.sidecars?.[1].securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
    expect(stored.spec?.fsGroup).toBe(2000);
    expect(stored.spec?.idleTimeout).toBe("30m");
  });

  it("judges a spec change like a create (decision 0017) and lets metadata change", async () => {
    await createSandbox(ns.name, "fixed");
    await waitPhase(ns.name, "fixed", "Ready");
    await expect(
      K8s(SandboxModel, { name: "fixed", namespace: ns.name }).Patch([
        { op: "add", path: "/spec/securityContext/privileged", value: true },
      ]),
    ).rejects.toMatchObject({
      data: { message: expect.stringContaining("spec.securityContext.privileged") },
    });
    const changed = await K8s(SandboxModel, { name: "fixed", namespace: ns.name }).Patch([
      { op: "replace", path: "/spec/image", value: "other:2" },
    ]);
    expect(changed.spec?.image).toBe("other:2");
    const renewed = await K8s(SandboxModel, { name: "fixed", namespace: ns.name }).Patch([
      { op: "add", path: "/metadata/annotations", value: { "jr2.dev/keepalive": new Date().toISOString() } },
    ]);
    expect(renewed.metadata?.annotations?.["jr2.dev/keepalive"]).toBeDefined();
  });
});

describe("admission of Sandbox pods", () => {
  /** A hand-made pod claiming to be the Sandbox "plain"'s, created with kubectl's extra `as` flags. */
  const createImpostor = (name: string, as: string[]) =>
    kubectl(["create", ...as, "-f", "-"], {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: ns.name, labels: { "sandbox.jr2.dev/name": "plain" } },
      spec: { containers: [{ name: "harness", image: "x" }] },
    });

  it("refuses a hand-made pod carrying the Sandbox label", async () => {
    const { code, out } = await createImpostor("impostor", ["--as=jr2-test-human", "--as-group=system:masters"]);
    expect(code).not.toBe(0);
    expect(out).toContain("only the jr2 operator creates Sandbox pods");
    expect(out).toContain('"jr2-test-human"');
  });

  // Decision 0029: only the operator's own pod creates skip the webhook, by its identity (locally a
  // certificate naming its service account), so the developer's labelled pod is judged as anyone's.
  it("judges a labelled pod from the cluster's admin too: the operator alone skips the webhook", async () => {
    const { code, out } = await createImpostor("admin-impostor", []);
    expect(code).not.toBe(0);
    expect(out).toContain("only the jr2 operator creates Sandbox pods");
    expect(out).toContain("spec.containers[0].securityContext");
  });

  // Decision 0048: seccomp RuntimeDefault for the pod; the user seat's NET_RAW, unless it says otherwise.
  it("builds a direct CR's pod with seccomp RuntimeDefault and the user seat without NET_RAW, or with it when stated", async () => {
    await createSandbox(ns.name, "netraw", {
      sidecars: [{ name: "user", image: "u", securityContext: { capabilities: { drop: [] } } }],
    });
    const stored = await getSandbox(ns.name, "netraw");
    expect(stored.spec?.sidecars?.[0].securityContext).toEqual({ capabilities: { drop: [] } });
    await waitPhase(ns.name, "plain", "Ready");
    await waitPhase(ns.name, "netraw", "Ready");
    const [plain] = await listPods(ns.name, "plain");
    const [netraw] = await listPods(ns.name, "netraw");
    for (const pod of [plain, netraw])
      expect(pod.spec?.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
    const user = (pod: typeof plain) => pod.spec?.containers.find((c) => c.name === "user");
    expect(user(plain)?.securityContext?.capabilities?.drop).toEqual(["NET_RAW"]);
    expect(user(netraw)?.securityContext?.capabilities?.drop ?? []).not.toContain("NET_RAW");
  });

  // Decision 0048: the credential holders are entered by nobody; the operator's identity opens nothing.
  describe("exec and attach into a Sandbox pod", () => {
    beforeAll(() => waitPhase(ns.name, "plain", "Ready"));

    it.each([
      ["exec", "custodian", ["exec", "-n", "NS", "plain", "-c", "custodian", "--", "cat", "/proc/1/environ"]],
      ["exec", "effector", ["exec", "-n", "NS", "plain", "-c", "effector", "--", "sh"]],
      ["attach", "custodian", ["attach", "-n", "NS", "plain", "-c", "custodian"]],
    ])("refuses %s into the %s, naming it, why and the harness instead", async (verb, container, args) => {
      const { code, out } = await kubectl(args.map((a) => (a === "NS" ? ns.name : a)));
      expect(code).not.toBe(0);
      expect(out).toContain(`${verb} into container "${container}" of Sandbox pod ${ns.name}/plain is refused`);
      expect(out).toContain("credential holder");
      expect(out).toContain(`kubectl exec -n ${ns.name} plain -c harness`);
    });

    it("refuses the operator's own identity too", async () => {
      const { code, out } = await kubectl([
        "exec",
        `--as=${DEPLOYED_OPERATOR}`,
        "--as-group=system:masters",
        "-n",
        ns.name,
        "plain",
        "-c",
        "custodian",
        "--",
        "true",
      ]);
      expect(code).not.toBe(0);
      expect(out).toContain('exec into container "custodian" of Sandbox pod');
    });

    // On a kwok node the exec then fails at the node; the webhook let it through.
    it.each(["harness", "user"])("lets exec into the %s through admission", async (container) => {
      // Bounded: past admission, a kwok node's address may not answer at all.
      const { out } = await kubectl([
        "exec",
        "--request-timeout=20s",
        "-n",
        ns.name,
        "plain",
        "-c",
        container,
        "--",
        "true",
      ]);
      expect(out).not.toContain("credential holder");
      expect(out).not.toContain("admission webhook");
    });
  });

  it("refuses an ephemeral container that targets the custodian", async () => {
    await waitPhase(ns.name, "plain", "Ready");
    const { code, out } = await kubectl(["debug", "-n", ns.name, "plain", "--image=busybox", "--target=custodian"]);
    expect(code).not.toBe(0);
    expect(out).toContain('targetContainerName: may not be "custodian"');
  });
});

// Decision 0067: a Sandbox pod's jr2 labels and annotations are the operator's (its policies select
// it by them), on the pod and on pods/status; an ephemeral container is held to the Harness's
// context; a Sandbox is created only in an opted-in namespace, whatever the operator's rights.
describe("a Sandbox pod's jr2 metadata, its debug containers, and the namespace's opt-in (decision 0067)", () => {
  const closed = useNamespace("admission-closed", { optedIn: false });
  const RESTRICTED = {
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };
  const pod = async () => (await listPods(ns.name, "guarded"))[0];

  beforeAll(async () => {
    // An emptyDir only the effector mounts: its scratch, as the Orchestrator composes it.
    await createSandbox(ns.name, "guarded", {
      volumes: [{ name: "scratch", emptyDir: {} }],
      sidecars: [
        { name: "custodian", image: "c" },
        { name: "effector", image: "e", volumeMounts: [{ name: "scratch", mountPath: "/run/jr2/scratch" }] },
      ],
    });
    await waitPhase(ns.name, "guarded", "Ready");
  });

  it.each([
    ["label", ["app.kubernetes.io/managed-by-"], "labels[app.kubernetes.io/managed-by]", 'removes it ("jr2-operator")'],
    [
      "label",
      ["--overwrite", "app.kubernetes.io/managed-by=mine"],
      "labels[app.kubernetes.io/managed-by]",
      "changes it",
    ],
    ["label", ["jr2.dev/tenant=someone"], "labels[jr2.dev/tenant]", "adds it"],
    ["annotate", ["sandbox.jr2.dev/name-"], "annotations[sandbox.jr2.dev/name]", "removes it"],
  ])("refuses `kubectl %s` %j on the pod by anyone but the operator", async (verb, args, field, words) => {
    const { code, out } = await kubectl([verb, "pod", "-n", ns.name, "guarded", ...args]);
    expect(code).not.toBe(0);
    expect(out).toContain(`metadata.${field}: only the jr2 operator sets, changes or removes jr2's`);
    expect(out).toContain(words);
    expect((await pod()).metadata?.labels?.["app.kubernetes.io/managed-by"]).toBe("jr2-operator");
  });

  it("refuses the same change through pods/status, which the API server would take", async () => {
    const patchStatus = (patch: object) =>
      kubectl([
        "patch",
        "pod",
        "-n",
        ns.name,
        "guarded",
        "--subresource=status",
        "--type=merge",
        "-p",
        JSON.stringify(patch),
      ]);
    const { code, out } = await patchStatus({ metadata: { labels: { "app.kubernetes.io/managed-by": null } } });
    expect(code).not.toBe(0);
    expect(out).toContain("metadata.labels[app.kubernetes.io/managed-by]: only the jr2 operator");
    // A status write that leaves the metadata alone (the kubelet's kind) goes through.
    const ok = await patchStatus({ status: { message: "status alone" } });
    expect(ok).toMatchObject({ code: 0 });
  });

  it("lets anyone change the pod's other labels; both policies still select it", async () => {
    expect(await kubectl(["label", "pod", "-n", ns.name, "guarded", "team=a"])).toMatchObject({ code: 0 });
    const policies = (await K8s(kind.NetworkPolicy).InNamespace(ns.name).Get()).items;
    expect(policies.map((p) => p.metadata?.name).sort()).toEqual(["jr2-sandbox-egress", "jr2-sandbox-ingress"]);
    for (const p of policies) {
      // The API server's own reading of the written selector.
      const q = new URLSearchParams({ labelSelector: selectorString(p.spec!.podSelector as LabelSelector) });
      const selected = await kubeRequest<{ items: Obj[] }>("GET", `${paths.pods(ns.name)}?${q}`);
      expect([p.metadata?.name, selected.items.map((x) => x.metadata.name)]).toEqual([
        p.metadata?.name,
        expect.arrayContaining(["guarded"]),
      ]);
    }
  });

  it("refuses kubectl debug in the baseline profile (NET_RAW kept), admits --profile=restricted", async () => {
    const legacy = await kubectl(["debug", "-n", ns.name, "guarded", "--image=busybox", "--profile=legacy"]);
    expect(legacy.code).not.toBe(0);
    expect(legacy.out).toContain('securityContext.capabilities.drop: must include "ALL" for an ephemeral container');
    expect(legacy.out).toContain("held to the Harness's context");
    const restricted = await kubectl([
      "debug",
      "-n",
      ns.name,
      "guarded",
      "--image=busybox",
      "--profile=restricted",
      "--target=harness",
    ]);
    expect(restricted).toMatchObject({ code: 0 });
    const added = (await pod()).spec?.ephemeralContainers ?? [];
    expect(added.map((c) => [c.targetContainerName, c.securityContext?.capabilities?.drop])).toEqual([
      ["harness", ["ALL"]],
    ]);
  });

  it("refuses a debug container mounting the effector's scratch, in the Harness's context or not", async () => {
    const current = await pod();
    const body = {
      ...current,
      spec: {
        ...current.spec,
        ephemeralContainers: [
          ...(current.spec?.ephemeralContainers ?? []),
          {
            name: "scratch-reader",
            image: "busybox",
            securityContext: RESTRICTED,
            volumeMounts: [{ name: "scratch", mountPath: "/x" }],
          },
        ],
      },
    };
    const { code, out } = await kubectl(
      ["replace", "--raw", `/api/v1/namespaces/${ns.name}/pods/guarded/ephemeralcontainers`, "-f", "-"],
      body,
    );
    expect(code).not.toBe(0);
    expect(out).toMatch(
      /spec\.ephemeralContainers\[\d+\]\.volumeMounts\[0\]: may not mount the "effector" container's volume/,
    );
  });

  // Not by RBAC alone: the integration operator is the cluster's admin, as npm start's is.
  it("refuses a Sandbox created where the namespace has not opted in, naming it and the fix; admits it once labelled", async () => {
    const create = () =>
      kubectl(["create", "-f", "-"], {
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Sandbox",
        metadata: { name: "outside", namespace: closed.name },
        spec: { image: "ghcr.io/example/harness:1" },
      });
    const refused = await create();
    expect(refused.code).not.toBe(0);
    expect(refused.out).toContain(`metadata.namespace: namespace "${closed.name}" has not opted in to hold Sandboxes`);
    expect(refused.out).toContain("jr2.dev/sandboxes=enabled");
    expect(refused.out).toContain("JR2_SANDBOX_NAMESPACES");
    expect(await listPods(closed.name)).toEqual([]);
    // Labelled a moment ago: admitted, though the module's watch may not have said so yet.
    expect(await kubectl(["label", "namespace", closed.name, "jr2.dev/sandboxes=enabled"])).toMatchObject({ code: 0 });
    expect(await create()).toMatchObject({ code: 0 });
  });
});
