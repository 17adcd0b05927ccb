// The benchmarks' cost per Sandbox as work (bench/cost.ts, decision 0043): which requests count as
// writes, etcd's counters, and the verdict beside each target.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseLoad } from "../../bench/apiserver-load";
import {
  controlPlanePids,
  cpuSeconds,
  etcdMetricsUrl,
  judged,
  parseEtcd,
  requestsPer,
  withVerdict as verdict,
  writesOf,
  threadCpuMs,
} from "../../bench/cost";

const line = (verb: string, resource: string, subresource: string, n: number) =>
  `apiserver_request_total{code="201",component="apiserver",group="",resource="${resource}",scope="resource",subresource="${subresource}",verb="${verb}",version="v1"} ${n}`;

const metrics = (n: number) =>
  [
    line("POST", "pods", "", 3 * n),
    line("POST", "pods", "binding", 2 * n),
    line("PATCH", "sandboxes", "status", n),
    line("GET", "pods", "", 5 * n),
    line("PUT", "leases", "", 40 * n),
    line("PATCH", "nodes", "status", 9 * n),
    `apiserver_watch_events_total{group="",resource="pods",version="v1"} ${7 * n}`,
    `process_cpu_seconds_total ${12.5 * n}`,
  ].join("\n");

describe("requestsPer and writesOf", () => {
  const per = requestsPer(parseLoad(metrics(1)), parseLoad(metrics(3)), 2);

  it("counts requests by verb and resource per unit of work, reads among them, watch events apart", () => {
    expect(per.get("POST pods")).toBe(3);
    expect(per.get("GET pods")).toBe(5);
    expect(per.has("watch pods")).toBe(false);
    expect(per.has("process cpu")).toBe(false);
  });

  it("counts as writes what changes stored objects, and leaves out the heartbeats of nodes and leases", () => {
    const w = writesOf(per);
    expect(w.total).toBe(3 + 2 + 1);
    expect([...w.byKey.keys()].sort()).toEqual(["PATCH sandboxes/status", "POST pods", "POST pods/binding"]);
  });

  it("reads the API server's own CPU seconds", () => {
    expect(parseLoad(metrics(2)).get("process cpu")).toEqual({ count: 0, seconds: 25 });
  });
});

describe("parseEtcd", () => {
  it("reads the bytes etcd wrote to its log and its database's size", () => {
    const text = [
      "# TYPE etcd_disk_wal_write_bytes_total gauge",
      "etcd_disk_wal_write_bytes_total 123456",
      "etcd_mvcc_db_total_size_in_bytes 2.097152e+06",
    ].join("\n");
    expect(parseEtcd(text)).toEqual({ walBytes: 123456, dbBytes: 2097152 });
    expect(parseEtcd("").walBytes).toBeNaN();
  });
});

describe("each figure with its verdict", () => {
  it("judges a plain bound", () => {
    expect(judged(9.4, "<=", 9.5)).toEqual({ target: "<= 9.5", met: true });
    expect(judged(11.5, "<=", 9.5).met).toBe(false);
    expect(judged(NaN, "<=", 9.5).met).toBe(false);
  });

  it("fills in met for a target of one bound, and leaves a target of several clauses or none alone", () => {
    type Figure = { value: number; target?: string; met?: boolean };
    const withVerdict = (r: Figure) => verdict(r);
    expect(withVerdict({ value: 3, target: "<= 4" }).met).toBe(true);
    expect(withVerdict({ value: 5, target: "<= 4" }).met).toBe(false);
    expect(withVerdict({ value: 0.5, target: "< 1 at info" }).met).toBe(true);
    expect(withVerdict({ value: 2, target: "<= 1, <= 3 elsewhere" }).met).toBeUndefined();
    expect(withVerdict({ value: 2, target: "flat (< 8)" }).met).toBeUndefined();
    expect(withVerdict({ value: 2 }).met).toBeUndefined();
    expect(withVerdict({ value: 2, target: "<= 1", met: true }).met).toBe(true);
  });
});

describe("the processes a bench reads", () => {
  it("finds the control plane's pids beside the kubeconfig, only those alive", () => {
    const dir = mkdtempSync(join(tmpdir(), "jr2-bench-cost-"));
    mkdirSync(join(dir, "pids"));
    writeFileSync(join(dir, "pids", "kube-apiserver.pid"), `${process.pid}\n`);
    writeFileSync(join(dir, "pids", "etcd.pid"), "999999999\n");
    const pids = controlPlanePids(join(dir, "kubeconfig.yaml"));
    expect([...pids]).toEqual([["kube-apiserver", process.pid]]);
    expect(controlPlanePids("/nonexistent/kubeconfig.yaml").size).toBe(0);
  });

  it("reads a process's CPU seconds from /proc, NaN for none", () => {
    const t = cpuSeconds(process.pid);
    expect(t).toBeGreaterThan(0);
    expect(cpuSeconds(999999999)).toBeNaN();
    expect(cpuSeconds(undefined)).toBeNaN();
  });

  it("reads where etcd serves plain HTTP metrics from its command line, or says why not", async () => {
    const child = spawn(
      process.execPath,
      [
        "-e",
        "setInterval(() => {}, 1000)",
        "--",
        "--listen-client-urls=https://127.0.0.1:2379",
        "--listen-metrics-urls",
        "http://0.0.0.0:2381",
      ],
      { stdio: "ignore" },
    );
    const tlsOnly = spawn(
      process.execPath,
      ["-e", "setInterval(() => {}, 1000)", "--", "--listen-client-urls=https://127.0.0.1:2379"],
      { stdio: "ignore" },
    );
    try {
      await Promise.all([once(child, "spawn"), once(tlsOnly, "spawn")]);
      expect(etcdMetricsUrl(child.pid)).toEqual({ url: "http://127.0.0.1:2381/metrics" });
      expect(etcdMetricsUrl(tlsOnly.pid).why).toMatch(/TLS only/);
    } finally {
      child.kill();
      tlsOnly.kill();
    }
    // Neither flag: etcd's default.
    expect(etcdMetricsUrl(process.pid)).toEqual({ url: "http://127.0.0.1:2379/metrics" });
    expect(etcdMetricsUrl(undefined).why).toMatch(/no local etcd/);
  });
});

describe("threadCpuMs", () => {
  it("counts the CPU this process's threads spent, as the kernel's own count for the process does", () => {
    const before = threadCpuMs(process.pid);
    const start = process.cpuUsage();
    // Work until the kernel says this process spent 50 ms on a CPU, however busy the machine is.
    for (let used = 0; used < 50_000; ) {
      const u = process.cpuUsage(start);
      used = u.user + u.system;
    }
    const after = threadCpuMs(process.pid);
    expect(before).toBeGreaterThan(0);
    expect(after - before).toBeGreaterThan(40);
  });
});
