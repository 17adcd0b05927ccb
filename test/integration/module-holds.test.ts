// What a taken module token can write (decision 0069): its pod creates skip the pod webhook
// (decision 0029) and it holds `escalate` on the repo-credential Role (0046/0047), so the API server
// itself holds both with the built manifest's two ValidatingAdmissionPolicies. Server-side dry runs
// impersonating the module's service account (with system:masters: the policies hold its name
// whatever it is granted; what RBAC grants it is test/integration/rbac-matrix.test.ts's): the
// operator's own pod shape and Role are admitted, and a privileged pod, a hostPath outside the cache
// root, a pod without the Sandbox label, another Role and a rule beyond `get` on Secrets by name are
// each refused with what and why. Without the policies every one of these is admitted.
import { REPO_CREDENTIALS_ROLE, SANDBOX_NAME_LABEL } from "../../api/wire";
import { repoCredentialRules } from "../../capabilities/repo/credentials-role";
import * as kubectl from "../../dev/kubectl";
import { localModuleHolds } from "../../dev/local-operator";
import {
  applyBuiltHolds,
  asModule,
  builtModulePolicies,
  builtNamespaceHold,
  createAsModule,
  deleteHolds,
  moduleUser,
  operatorPod,
  privileged,
} from "../support/module-holds";
import { useNamespace } from "./support/cluster";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
const kubeconfig = () => process.env.KUBECONFIG!;
const ns = useNamespace("module-holds");
let holds: Obj[] = [];

beforeAll(async () => {
  holds = await applyBuiltHolds(kubeconfig(), ns.name);
}, 60_000);

afterAll(async () => {
  await deleteHolds(kubeconfig(), holds);
});

describe("the module's pod creates, held by the API server (decision 0069)", () => {
  it("names the module's service account as the build binds it, and the local module runs under the same policies", () => {
    expect(moduleUser()).toMatch(/^system:serviceaccount:pepr-system:pepr-/);
    // The local module (this tier's, with the default cache root) registers these very objects
    // under the built names: a refusal below is by the built CEL whichever copy answers.
    expect(localModuleHolds(moduleUser(), {})).toEqual(builtModulePolicies());
  });

  it("admits the pod the operator builds for jr2's Sandbox (Custodian, user seat, Effector's credentials, Repo caches)", async () => {
    const pod = operatorPod(ns.name);
    // The shape this test relies on: two Repo caches as hostPaths, a git credential projection.
    expect(pod.spec.volumes.filter((v: Obj) => v.hostPath)).toHaveLength(2);
    expect(pod.spec.volumes.some((v: Obj) => v.name === "jr2-git-0")).toBe(true);
    expect(await createAsModule(kubeconfig(), pod)).toBe("admitted");
  });

  it("refuses a privileged container, naming it", async () => {
    const answer = await createAsModule(kubeconfig(), privileged(operatorPod(ns.name)));
    expect(answer).toMatch(/jr2-module-pods/);
    expect(answer).toMatch(/is never privileged; these containers do not: user/);
  });

  it("refuses a hostPath outside the namespace's cache, naming the volume and its path", async () => {
    for (const hostPath of [
      { path: "/", type: "Directory" },
      // Another namespace's cache: the same layout, not this pod's namespace.
      { path: `/var/lib/jr2/repos/other-ns/app`, type: "DirectoryOrCreate" },
    ]) {
      const pod = operatorPod(ns.name);
      pod.spec.volumes.find((v: Obj) => v.name === "repo-app").hostPath = hostPath;
      const answer = await createAsModule(kubeconfig(), pod);
      expect(answer).toMatch(/one kind of hostPath, a Repo cache of its own namespace/);
      expect(answer).toContain(`repo-app (${hostPath.path})`);
    }
  });

  it("refuses a Repo cache mounted writable, and host namespaces", async () => {
    const writable = operatorPod(ns.name);
    writable.spec.containers[0].volumeMounts.find((m: Obj) => m.name === "repo-app").readOnly = false;
    expect(await createAsModule(kubeconfig(), writable)).toMatch(
      /mounts every Repo cache read-only; these containers do not: harness/,
    );
    const host = operatorPod(ns.name);
    host.spec.hostPID = true;
    expect(await createAsModule(kubeconfig(), host)).toMatch(/shares no host namespace/);
  });

  it("refuses a pod without the Sandbox label", async () => {
    const pod = operatorPod(ns.name);
    delete pod.metadata.labels[SANDBOX_NAME_LABEL];
    const answer = await createAsModule(kubeconfig(), pod);
    expect(answer).toMatch(/jr2-module-pods/);
    expect(answer).toContain(`carries the labels ${SANDBOX_NAME_LABEL}=<its name>`);
  });

  it("refuses a jr2-owned seat without the hardened context, and a service account token", async () => {
    const weak = operatorPod(ns.name);
    const custodian = weak.spec.containers.find((c: Obj) => c.name === "custodian");
    custodian.securityContext = { ...custodian.securityContext, allowPrivilegeEscalation: true };
    expect(await createAsModule(kubeconfig(), weak)).toMatch(/hardened securityContext.*not so in custodian/);
    const token = operatorPod(ns.name);
    token.spec.automountServiceAccountToken = true;
    expect(await createAsModule(kubeconfig(), token)).toMatch(/automountServiceAccountToken false/);
  });

  it("refuses an Effector's volume mounted in another seat, naming the seat (decision 0070)", async () => {
    const pod = operatorPod(ns.name);
    pod.spec.volumes.push({
      name: "effector-secret-0",
      projected: {
        defaultMode: 0o400,
        sources: [{ secret: { name: "forge", items: [{ key: "token", path: "token" }] } }],
      },
    });
    const effector = pod.spec.containers.find((c: Obj) => c.name === "effector");
    effector.volumeMounts.push({ name: "effector-secret-0", mountPath: "/run/jr2/secrets/forge/", readOnly: true });
    // The effector's own: admitted.
    expect(await createAsModule(kubeconfig(), pod)).toBe("admitted");
    for (const seat of ["harness", "user"]) {
      const stolen = structuredClone(pod);
      stolen.spec.containers
        .find((c: Obj) => c.name === seat)
        .volumeMounts.push({ name: "effector-secret-0", mountPath: "/stolen", readOnly: true });
      const answer = await createAsModule(kubeconfig(), stolen);
      expect(answer).toMatch(/jr2-module-pods/);
      expect(answer).toContain(`mounts the Effector's volumes (effector-*); these containers do not: ${seat}`);
    }
  });

  it("binds the module alone: the same privileged pod from another identity is not this policy's", async () => {
    // The cluster's admin (this kubeconfig) is not the module: the pod webhook judges labelled pods
    // of everyone else (decision 0029), so the answer, whatever it is, names no module policy.
    const answer = await kubectl
      .run(kubeconfig(), ["create", "--dry-run=server", "-f", "-"], JSON.stringify(privileged(operatorPod(ns.name))))
      .then(
        () => "admitted",
        (err: Error) => err.message,
      );
    expect(answer).not.toMatch(/jr2-module-pods/);
  });
});

describe("the module's Role writes, held by the API server (decision 0069)", () => {
  const role = (rules: unknown[], name = REPO_CREDENTIALS_ROLE, namespace = ns.name) => ({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name, namespace },
    rules,
  });
  const patch = (rules: unknown[]) =>
    asModule(kubeconfig(), [
      "patch",
      "role",
      REPO_CREDENTIALS_ROLE,
      "-n",
      ns.name,
      "--type=merge",
      "-p",
      JSON.stringify({ rules }),
    ]);

  beforeAll(async () => {
    // As the operator leaves it: created empty, then patched with the Repos' credential names.
    await kubectl.apply(kubeconfig(), [role(repoCredentialRules(["cred-a"]))]);
  });

  it("admits the Role as the operator writes it: created empty, patched to get Secrets by name", async () => {
    // A dry run where the Role is not there yet (nothing is stored).
    expect(await createAsModule(kubeconfig(), role([], REPO_CREDENTIALS_ROLE, "default"))).toBe("admitted");
    expect(await patch(repoCredentialRules(["cred-a", "cred-b"]))).toBe("admitted");
    expect(await patch([])).toBe("admitted");
  });

  it.each([
    ["a verb", [{ apiGroups: [""], resources: ["secrets"], verbs: ["get", "list"], resourceNames: ["cred-a"] }]],
    ["a resource", [{ apiGroups: [""], resources: ["secrets", "pods"], verbs: ["get"], resourceNames: ["cred-a"] }]],
    ["another rule", [...repoCredentialRules(["cred-a"]), { apiGroups: [""], resources: ["pods"], verbs: ["create"] }]],
    ["a group", [{ apiGroups: ["", "apps"], resources: ["secrets"], verbs: ["get"], resourceNames: ["cred-a"] }]],
    ["every Secret (no names)", [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }]],
    ["a wildcard", [{ apiGroups: ["*"], resources: ["*"], verbs: ["*"] }]],
  ])("refuses a patch adding %s", async (_what, rules) => {
    const answer = await patch(rules);
    expect(answer).toMatch(/jr2-module-roles/);
    expect(answer).toMatch(/grants only get on secrets by resourceNames.*no other verb, resource, group or wildcard/);
  });

  it("refuses a Role of another name", async () => {
    const answer = await createAsModule(kubeconfig(), role([], "anything-else"));
    expect(answer).toMatch(/the module writes one Role, jr2-cache-agent-repo-credentials, not anything-else/);
  });
});

describe("every pod in a Sandbox namespace: the baseline, the Repo caches' hostPath aside (decision 0069)", () => {
  const sandboxes = useNamespace("holds-baseline");
  const enforced = useNamespace("holds-psa");
  let nsHold: Obj[] = [];
  /** A pod nobody's Sandbox owns, as a tenant with pod create there might write it. */
  const plain = (extra: Obj = {}) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "tenant-pod", namespace: sandboxes.name },
    spec: { containers: [{ name: "main", image: "busybox", ...extra.container }], ...extra.spec },
  });
  const create = (pod: unknown) =>
    kubectl.run(kubeconfig(), ["create", "--dry-run=server", "-f", "-"], JSON.stringify(pod)).then(
      () => "admitted",
      (err: Error) => err.message,
    );

  beforeAll(async () => {
    nsHold = builtNamespaceHold(sandboxes.name);
    await kubectl.apply(kubeconfig(), nsHold);
    const deadline = Date.now() + 30_000;
    const probe = () => create(plain({ container: { securityContext: { privileged: true } } }));
    while (!(await probe()).includes("jr2-sandbox-namespace-pods-test")) {
      if (Date.now() > deadline) throw new Error("the namespace policy did not judge a probe in 30 s");
      await new Promise((r) => setTimeout(r, 250));
    }
  }, 60_000);

  afterAll(async () => {
    await deleteHolds(kubeconfig(), nsHold);
  });

  it("refuses anyone's privileged pod, host network and a hostPath outside the namespace's cache", async () => {
    expect(await create(plain({ container: { securityContext: { privileged: true } } }))).toMatch(
      /jr2-sandbox-namespace-pods.*is never privileged; these containers do not: main/,
    );
    expect(await create(plain({ spec: { hostNetwork: true } }))).toMatch(/shares no host namespace/);
    expect(await create(plain({ spec: { volumes: [{ name: "root", hostPath: { path: "/" } }] } }))).toContain(
      "root (/)",
    );
  });

  it("admits a plain pod and the operator's pod, whose Repo caches are hostPaths", async () => {
    expect(await create(plain())).toBe("admitted");
    const pod = operatorPod(sandboxes.name);
    // As the module (the pod webhook skips its creates), so this policy is what judges the caches.
    expect(await createAsModule(kubeconfig(), pod)).toBe("admitted");
  });

  it("is not Pod Security admission's baseline, which refuses the operator's pod for its Repo caches", async () => {
    await kubectl.run(kubeconfig(), [
      "label",
      "namespace",
      enforced.name,
      "pod-security.kubernetes.io/enforce=baseline",
      "--overwrite",
    ]);
    const answer = await createAsModule(kubeconfig(), operatorPod(enforced.name));
    expect(answer).toMatch(/violates PodSecurity "baseline:.*hostPath volumes.*repo-app/);
  });
});
