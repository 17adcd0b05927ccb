// The Orchestrator as deployed (orchestrator/orchestrator-manifests.ts, decision 0047): its
// Sandboxes in an opted-in namespace that is not its own, its writes bound there alone, no
// NetworkPolicy writes (the operator's), and a policy over its API naming who may call it.
import {
  orchestratorManifests,
  ORCHESTRATOR_API_POLICY,
  ORCHESTRATOR_LEASES_ROLE,
  ORCHESTRATOR_PEERS_ROLE,
  ORCHESTRATOR_SANDBOXES_ROLE,
} from "../../orchestrator/orchestrator-manifests";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
const of = (objs: Obj[], kind: string, name?: string) =>
  objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));

describe("orchestratorManifests", () => {
  const objs = orchestratorManifests({ image: "jr2/companions:t" }) as Obj[];

  it("puts its Sandboxes in jr2-sandboxes by default, opted in, never its own namespace", () => {
    const env = of(objs, "Deployment")[0].spec.template.spec.containers[0].env;
    expect(env).toContainEqual({ name: "JR2_NAMESPACE", value: "jr2-sandboxes" });
    expect(of(objs, "Namespace", "jr2-sandboxes")[0].metadata.labels).toEqual({ "jr2.dev/sandboxes": "enabled" });
    expect(() => orchestratorManifests({ image: "x", workspaceNamespace: "jr2-system" })).toThrow(
      /workspaceNamespace jr2-system is the Orchestrator's own namespace.*name another/,
    );
  });

  it("binds a ClusterRole of namespaced writes in its Sandbox namespace alone, without NetworkPolicies", () => {
    // In its own namespace, two Roles: list the egress point's EndpointSlices (decision 0076), and
    // the replicas' Leases (decision 0079).
    expect(of(objs, "Role").map((r: Obj) => [r.metadata.namespace, r.metadata.name, r.rules])).toEqual([
      [
        "jr2-system",
        ORCHESTRATOR_PEERS_ROLE,
        [{ apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list"] }],
      ],
      [
        "jr2-system",
        ORCHESTRATOR_LEASES_ROLE,
        [
          {
            apiGroups: ["coordination.k8s.io"],
            resources: ["leases"],
            verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
          },
        ],
      ],
    ]);
    expect(of(objs, "ClusterRoleBinding")).toEqual([]);
    const [role] = of(objs, "ClusterRole", ORCHESTRATOR_SANDBOXES_ROLE);
    expect(JSON.stringify(role.rules)).not.toContain("networkpolicies");
    const bindings = of(objs, "RoleBinding");
    expect(bindings.map((b: Obj) => [b.metadata.namespace, b.roleRef.name])).toEqual([
      ["jr2-sandboxes", ORCHESTRATOR_SANDBOXES_ROLE],
      ["jr2-system", ORCHESTRATOR_PEERS_ROLE],
      ["jr2-system", ORCHESTRATOR_LEASES_ROLE],
    ]);
    for (const b of bindings)
      expect(b.subjects).toEqual([{ kind: "ServiceAccount", name: "jr2-orchestrator", namespace: "jr2-system" }]);
  });

  it("admits to its API the Sandbox pods of opted-in namespaces, its own replicas and, by default, its own namespace's pods", () => {
    const [policy] = of(objs, "NetworkPolicy", ORCHESTRATOR_API_POLICY);
    expect(policy.metadata.namespace).toBe("jr2-system");
    expect(policy.spec.podSelector).toEqual({ matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } });
    expect(policy.spec.ingress).toEqual([
      {
        from: [
          {
            namespaceSelector: { matchLabels: { "jr2.dev/sandboxes": "enabled" } },
            // The label the pod guard holds (decision 0067): only the operator's pods carry it.
            podSelector: { matchExpressions: [{ key: "sandbox.jr2.dev/name", operator: "Exists" }] },
          },
          // Its replicas forward calls to each other (decision 0079).
          { podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } } },
          { podSelector: {} },
        ],
        ports: [{ protocol: "TCP", port: 8090 }],
      },
    ]);
    const open = orchestratorManifests({ image: "x", apiClients: [{ namespaceSelector: {} }] }) as Obj[];
    // Whoever else is admitted, its replicas still are.
    expect(of(open, "NetworkPolicy")[0].spec.ingress[0].from.slice(1)).toEqual([
      { podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } } },
      { namespaceSelector: {} },
    ]);
  });

  it("serves /metrics with no token on port 9090 (`metrics`), admitting the monitoring namespaces alone (decision 0076)", () => {
    const [dep] = of(objs, "Deployment");
    const c = dep.spec.template.spec.containers[0];
    expect(c.ports).toContainEqual({ name: "metrics", containerPort: 9090 });
    expect(c.env).toContainEqual({ name: "JR2_METRICS_PORT", value: "9090" });
    expect(of(objs, "Service")[0].spec.ports).toContainEqual({ name: "metrics", port: 9090, targetPort: "metrics" });
    // None named: no rule for 9090 (an empty `from` would admit every pod).
    const [closed] = of(objs, "NetworkPolicy", ORCHESTRATOR_API_POLICY);
    expect(JSON.stringify(closed.spec.ingress)).not.toContain("9090");
    const [open] = of(
      orchestratorManifests({ image: "x", monitoringNamespaces: ["monitoring", "prom"] }) as Obj[],
      "NetworkPolicy",
      ORCHESTRATOR_API_POLICY,
    );
    expect(open.spec.ingress[1]).toEqual({
      from: [
        {
          namespaceSelector: {
            matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: ["monitoring", "prom"] }],
          },
        },
      ],
      ports: [{ protocol: "TCP", port: 9090 }],
    });
  });

  // The Sandbox policies admit its pods by the namespace's name, not this label (decision 0067).
  it("labels its own namespace as jr2's, and its pods by the name the Sandbox policies admit", () => {
    expect(of(objs, "Namespace", "jr2-system")[0].metadata.labels).toEqual({ "app.kubernetes.io/part-of": "jr2" });
    expect(of(objs, "Deployment")[0].spec.template.metadata.labels["app.kubernetes.io/name"]).toBe("jr2-orchestrator");
  });

  it("mounts a TLS Secret when given one, serving and probing https", () => {
    const [dep] = of(orchestratorManifests({ image: "x", tlsSecret: "jr2-orchestrator-tls" }) as Obj[], "Deployment");
    const pod = dep.spec.template.spec;
    const c = pod.containers[0];
    expect(pod.volumes).toContainEqual({
      name: "tls",
      secret: { secretName: "jr2-orchestrator-tls", defaultMode: 0o440 },
    });
    expect(c.volumeMounts).toContainEqual({ name: "tls", mountPath: "/etc/jr2/tls", readOnly: true });
    expect(c.env).toEqual(
      expect.arrayContaining([
        { name: "JR2_TLS_CERT_FILE", value: "/etc/jr2/tls/tls.crt" },
        { name: "JR2_TLS_KEY_FILE", value: "/etc/jr2/tls/tls.key" },
      ]),
    );
    expect(c.readinessProbe.httpGet.scheme).toBe("HTTPS");
    const plain = of(objs, "Deployment")[0].spec.template.spec.containers[0];
    expect(plain.env.map((e: Obj) => e.name)).not.toContain("JR2_TLS_CERT_FILE");
    expect(plain.readinessProbe.httpGet.scheme).toBe("HTTP");
  });

  describe("several replicas (decision 0079)", () => {
    const dep = (o: Obj[]) => of(o, "Deployment")[0];
    const env = (o: Obj[]) => dep(o).spec.template.spec.containers[0].env as Obj[];

    it("runs two, rolled one at a time, spread over nodes, with a budget keeping one through a drain", () => {
      const d = dep(objs);
      expect(d.spec.replicas).toBe(2);
      expect(d.spec.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
      const pod = d.spec.template.spec;
      // A one-node cluster still runs both: ScheduleAnyway, as the egress point and the admission pods.
      expect(pod.topologySpreadConstraints).toEqual([
        {
          maxSkew: 1,
          topologyKey: "kubernetes.io/hostname",
          whenUnsatisfiable: "ScheduleAnyway",
          labelSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } },
          matchLabelKeys: ["pod-template-hash"],
        },
      ]);
      // Time to hand its shards over on SIGTERM.
      expect(pod.terminationGracePeriodSeconds).toBe(30);
      expect(pod.containers[0].readinessProbe.httpGet.path).toBe("/healthz");
      expect(of(objs, "PodDisruptionBudget").map((p: Obj) => [p.metadata.namespace, p.metadata.name, p.spec])).toEqual([
        [
          "jr2-system",
          "jr2-orchestrator",
          { minAvailable: 1, selector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } } },
        ],
      ]);
    });

    it("takes a count and a budget; one replica has none; a budget not below the replicas is refused", () => {
      const three = orchestratorManifests({ image: "x", replicas: 3, podDisruptionBudget: { minAvailable: 2 } });
      expect(dep(three).spec.replicas).toBe(3);
      expect(of(three, "PodDisruptionBudget")[0].spec.minAvailable).toBe(2);
      expect(
        of(orchestratorManifests({ image: "x", replicas: 3, podDisruptionBudget: false }), "PodDisruptionBudget"),
      ).toEqual([]);
      const one = orchestratorManifests({ image: "x", replicas: 1 });
      expect(dep(one).spec.replicas).toBe(1);
      expect(of(one, "PodDisruptionBudget")).toEqual([]);
      expect(() =>
        orchestratorManifests({ image: "x", replicas: 2, podDisruptionBudget: { minAvailable: 2 } }),
      ).toThrow(
        /podDisruptionBudget.minAvailable 2 must be below replicas \(2\).*lower it, raise replicas, or write podDisruptionBudget false/,
      );
      expect(() => orchestratorManifests({ image: "x", replicas: 0 })).toThrow(/replicas 0 is no count of pods/);
    });

    it("tells each replica its name, its address as the peer url, and its own namespace for the Leases", () => {
      const e = env(objs);
      const at = (n: string) => e.findIndex((v: Obj) => v.name === n);
      expect(e).toEqual(
        expect.arrayContaining([
          { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
          { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          { name: "JR2_SHARD_LEASES_NAMESPACE", value: "$(POD_NAMESPACE)" },
          { name: "JR2_PEER_URL", value: "http://$(POD_IP):8090" },
        ]),
      );
      // The kubelet expands $(VAR) only for a variable defined earlier in the list.
      expect(at("POD_NAMESPACE")).toBeLessThan(at("JR2_SHARD_LEASES_NAMESPACE"));
      expect(at("POD_IP")).toBeLessThan(at("JR2_PEER_URL"));
      expect(env(orchestratorManifests({ image: "x", tlsSecret: "t" }))).toContainEqual({
        name: "JR2_PEER_URL",
        value: "https://$(POD_IP):8090",
      });
    });
  });
});
