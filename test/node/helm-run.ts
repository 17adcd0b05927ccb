// helm against the node tier's cluster without blocking the event loop (a loop of creates may run
// beside it): shared by the tests that install the chart (helm.test.ts, release.test.ts).
import { spawn } from "node:child_process";

export type HelmRun = (args: string[]) => Promise<{ status: number | null; out: string }>;

/** A runner of `helm` in `namespace`, and one that throws with helm's output unless it exits 0. */
export function helmRunner(
  helm: string,
  namespace: string,
): { helmRun: HelmRun; helmOk: (args: string[]) => Promise<string> } {
  const helmRun: HelmRun = (args) =>
    new Promise((resolve) => {
      const p = spawn(helm, [...args, "--kubeconfig", process.env.KUBECONFIG!, "--namespace", namespace], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      p.stdout.on("data", (c) => (out += c));
      p.stderr.on("data", (c) => (out += c));
      p.on("close", (status) => resolve({ status, out }));
    });
  const helmOk = async (args: string[]) => {
    const r = await helmRun(args);
    if (r.status !== 0) throw new Error(`helm ${args.join(" ")} failed (exit ${r.status}):\n${r.out}`);
    return r.out;
  };
  return { helmRun, helmOk };
}
