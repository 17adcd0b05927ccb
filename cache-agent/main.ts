// `npm run cache-agent`: one node's Repo cache agent. NODE_NAME (the node it serves),
// JR2_CACHE_ROOT (where the caches live, default /var/lib/jr2/repos), KUBECONFIG (the cluster).
import { mkdirSync } from "node:fs";
import { DEFAULT_CACHE_ROOT } from "../capabilities/repo/caches";
import { CacheAgent } from "./agent";

const node = process.env.NODE_NAME;
if (!node) {
  console.error(
    "cache-agent: NODE_NAME is not set: set it to the node this agent serves (the downward API's spec.nodeName)",
  );
  process.exit(2);
}
const root = process.env.JR2_CACHE_ROOT ?? DEFAULT_CACHE_ROOT;
mkdirSync(root, { recursive: true });

const log = (level: "info" | "warn", msg: string, fields: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ level, time: new Date().toISOString(), node, msg, ...fields }));

new CacheAgent(node, root, log)
  .start()
  .then((stop) => {
    log("info", "cache agent watching Repos and Sandboxes", { root });
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => (stop(), process.exit(0)));
  })
  .catch((err) => {
    log("warn", "cache agent could not start", { err: String(err?.message ?? err) });
    process.exit(1);
  });
