// Stops the module (removing its webhooks), then the lone 1.34 API server and its etcd, and removes
// their state: nothing of the tier outlives it.
import { spawnSync } from "node:child_process";
import { APISERVER_SH } from "./global-setup";

type Held = { operator?: { stop(): Promise<void> } };

export default async function globalTeardown() {
  const held = (globalThis as typeof globalThis & { __jr2k134?: Held }).__jr2k134;
  try {
    await held?.operator?.stop();
  } finally {
    const r = spawnSync("bash", [APISERVER_SH, "down", "kube-1.34"], { encoding: "utf8" });
    if (r.status !== 0) process.stderr.write(`the 1.34 API server did not stop cleanly:\n${r.stderr}\n`);
  }
}
