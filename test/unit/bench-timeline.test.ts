// The real-node bench's reading of what the cluster records (bench/timeline.ts), on lines as
// containerd, the kubelet, the companions and the Orchestrator write them.
import {
  Timelines,
  containerLogMarks,
  containerdMarks,
  kubeletMarks,
  markPod,
  orchestratorMarks,
  spans,
} from "../../bench/timeline";

const at = (iso: string) => Date.parse(iso);

const containerd = [
  `time="2026-12-06T09:28:27.020128860Z" level=info msg="RunPodSandbox for name:\\"ws-a\\" uid:\\"41d9\\" namespace:\\"ns\\""`,
  `time="2026-12-06T09:28:27.100000000Z" level=info msg="RunPodSandbox for name:\\"ws-ab\\" uid:\\"9999\\" namespace:\\"ns\\""`,
  `time="2026-12-06T09:28:27.366395966Z" level=info msg="RunPodSandbox for name:\\"ws-a\\" uid:\\"41d9\\" namespace:\\"ns\\" returns sandbox id \\"9995\\""`,
  `time="2026-12-06T09:28:27.381004812Z" level=info msg="CreateContainer within sandbox \\"9995\\" for container name:\\"harness\\""`,
  `time="2026-12-06T09:28:27.408091686Z" level=info msg="CreateContainer within sandbox \\"9995\\" for name:\\"harness\\" returns container id \\"172d\\""`,
  `time="2026-12-06T09:28:27.409754554Z" level=info msg="StartContainer for \\"172d\\""`,
  `time="2026-12-06T09:28:27.615322382Z" level=info msg="StartContainer for \\"172d\\" returns successfully"`,
  `time="2026-12-06T09:28:27.625680401Z" level=info msg="CreateContainer within sandbox \\"9995\\" for container name:\\"custodian\\""`,
  `time="2026-12-06T09:28:27.654735394Z" level=info msg="CreateContainer within sandbox \\"9995\\" for name:\\"custodian\\" returns container id \\"39e1\\""`,
  `time="2026-12-06T09:28:27.663805992Z" level=info msg="StartContainer for \\"39e1\\""`,
  `time="2026-12-06T09:28:27.994612399Z" level=info msg="StartContainer for \\"39e1\\" returns successfully"`,
  `time="2026-12-06T09:28:28.000000000Z" level=info msg="StartContainer for \\"ffff\\" returns successfully"`,
].join("\n");

const kubelet = [
  `I1206 09:28:26.751933    2227 reconciler_common.go:251] "operationExecutor.VerifyControllerAttachedVolume started for volume \\"jr2-ca\\" (UniqueName: \\"kubernetes.io/configmap/41d9-jr2-ca\\") pod \\"ws-a\\" (UID: \\"41d9\\") " pod="ns/ws-a"`,
  `I1206 09:28:26.752040    2227 reconciler_common.go:251] "operationExecutor.VerifyControllerAttachedVolume started for volume \\"work\\" (UniqueName: \\"kubernetes.io/empty-dir/41d9-work\\") pod \\"ws-a\\" (UID: \\"41d9\\") " pod="ns/ws-a"`,
  `I1206 09:28:28.371270    2227 pod_startup_latency_tracker.go:148] "Observed pod startup duration" pod="ns/ws-a" podStartSLOduration=2.37 observedRunningTime="2026-12-06 09:28:28.037623154 +0000 UTC m=+849.898265547" watchObservedRunningTime="2026-12-06 09:28:28.371245645 +0000 UTC m=+850.231888028"`,
  `I1206 09:28:29.000000    2227 pod_startup_latency_tracker.go:148] "Observed pod startup duration" pod="ns/ws-ab" observedRunningTime="2026-12-06 09:28:28.9 +0000 UTC"`,
].join("\n");

describe("containerdMarks", () => {
  it("reads the pod sandbox asked and up, and each of its containers created and started, the last start as containers_up", () => {
    expect(containerdMarks(containerd, "ns", "ws-a")).toEqual({
      sandbox_req: at("2026-12-06T09:28:27.020Z"),
      sandbox_up: at("2026-12-06T09:28:27.366Z"),
      "create:harness": at("2026-12-06T09:28:27.381Z"),
      "created:harness": at("2026-12-06T09:28:27.408Z"),
      "start:harness": at("2026-12-06T09:28:27.409Z"),
      "started:harness": at("2026-12-06T09:28:27.615Z"),
      "create:custodian": at("2026-12-06T09:28:27.625Z"),
      "created:custodian": at("2026-12-06T09:28:27.654Z"),
      "start:custodian": at("2026-12-06T09:28:27.663Z"),
      "started:custodian": at("2026-12-06T09:28:27.994Z"),
      containers_up: at("2026-12-06T09:28:27.994Z"),
    });
  });

  it("starts over when the pod sandbox is asked for again, and reads nothing of another pod", () => {
    const again = `${containerd}\ntime="2026-12-06T09:28:30.000Z" level=info msg="RunPodSandbox for name:\\"ws-a\\" uid:\\"41d9\\" namespace:\\"ns\\" attempt:1"`;
    expect(containerdMarks(again, "ns", "ws-a")).toEqual({ sandbox_req: at("2026-12-06T09:28:30.000Z") });
    expect(containerdMarks(containerd, "other", "ws-a")).toEqual({});
  });
});

describe("kubeletMarks", () => {
  it("reads the pod's first volume and when the kubelet observed it running, for that pod alone", () => {
    expect(kubeletMarks(kubelet, "ns", "ws-a", 2026)).toEqual({
      kl_volumes: new Date(2026, 11, 6, 9, 28, 26, 751).getTime(),
      kl_running: at("2026-12-06T09:28:28.037Z"),
    });
    expect(kubeletMarks(kubelet, "ns", "ws-ab", 2026)).toEqual({ kl_running: at("2026-12-06T09:28:28.900Z") });
  });
});

describe("containerLogMarks", () => {
  it("reads listening, the first /healthz answered 200, and the /attach with its start", () => {
    const text = [
      `{"time":"2026-12-06T09:28:27.900Z","level":"info","message":"listening","port":8080}`,
      `{"time":"2026-12-06T09:28:27.950Z","method":"GET","path":"/healthz","status":503,"ms":0.4}`,
      `not json`,
      `{"time":"2026-12-06T09:28:28.950Z","method":"GET","path":"/healthz","status":200,"ms":0.4}`,
      `{"time":"2026-12-06T09:28:29.950Z","method":"GET","path":"/healthz","status":200,"ms":0.4}`,
      `{"time":"2026-12-06T09:28:30.500Z","method":"POST","path":"/attach","status":200,"ms":250}`,
    ].join("\n");
    expect(containerLogMarks(text, "harness")).toEqual({
      "harness:listening": at("2026-12-06T09:28:27.900Z"),
      "harness:probe_ok": at("2026-12-06T09:28:28.950Z"),
      "harness:attach_end": at("2026-12-06T09:28:30.500Z"),
      "harness:attach_start": at("2026-12-06T09:28:30.250Z"),
    });
  });
});

describe("orchestratorMarks", () => {
  it("reads the workspace's transitions from the Orchestrator's log lines", () => {
    const lines = [
      `{"time":"2026-12-06T09:28:26.000Z","level":"info","message":"workspace placing","workspace":"ws-a"}`,
      `{"time":"2026-12-06T09:28:26.100Z","level":"info","message":"workspace placing","workspace":"ws-ab"}`,
      `{"time":"2026-12-06T09:28:29.000Z","level":"info","message":"workspace attaching","workspace":"ws-a"}`,
    ];
    expect(orchestratorMarks(lines, "ws-a")).toEqual({
      "orch:placing": at("2026-12-06T09:28:26.000Z"),
      "orch:attaching": at("2026-12-06T09:28:29.000Z"),
    });
  });
});

describe("markPod and spans", () => {
  it("keeps each first sighting, and measures spans between marks, NaN where one is missing", () => {
    const t = new Timelines();
    markPod(t, { metadata: { name: "p" } }, 100);
    markPod(t, { metadata: { name: "p" }, spec: { nodeName: "n" } }, 150);
    markPod(
      t,
      {
        metadata: { name: "p" },
        spec: { nodeName: "n" },
        status: {
          conditions: [{ type: "Ready", status: "True" }],
          containerStatuses: [{ name: "harness", ready: true, state: { running: {} } }],
        },
      },
      900,
    );
    markPod(t, { metadata: { name: "p" }, spec: { nodeName: "n" } }, 1000);
    expect(t.get("p")).toEqual({
      pod: 100,
      bound: 150,
      "cond:Ready": 900,
      "running:harness": 900,
      "ready:harness": 900,
    });
    expect(
      spans(t.get("p"), [
        ["schedule", "pod", "bound"],
        ["start", "bound", "cond:Ready"],
        ["missing", "bound", "nowhere"],
      ]),
    ).toEqual({ schedule: 50, start: 750, missing: NaN });
  });
});
