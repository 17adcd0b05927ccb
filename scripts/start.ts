// `npm start`: the operator on an embedded default. With no KUBECONFIG it brings up the local
// control plane (test/cluster/cluster.sh); it builds the module, runs it here with admission and
// watch in one process, and on exit removes the webhook configurations it registered, so a stopped
// operator never blocks the cluster.
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { kubectlPath } from "./kubectl";
import { CACHE_DIR, ROOT, startLocalOperator } from "./local-operator";

function clusterUp(): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [join(ROOT, "test", "cluster", "cluster.sh"), "up"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let last = "";
    child.stdout.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      const lines = chunk.toString().trim().split("\n");
      last = lines[lines.length - 1] || last;
    });
    child.on("exit", (code) => {
      const m = /^KUBECONFIG=(.+)$/.exec(last.trim());
      if (code === 0 && m) resolve(m[1]);
      else reject(new Error(`npm run cluster -- up failed (exit ${code}); see its output above`));
    });
  });
}

async function main() {
  const kubeconfig = process.env.KUBECONFIG || (await clusterUp());
  console.log(`\n==> building the module (npm run build)`);
  const build = spawnSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (build.status !== 0) throw new Error("npm run build failed; run it alone to see why");

  const port = Number(process.env.JR2_PEPR_PORT ?? 3000);
  console.log(`==> starting the module on https://127.0.0.1:${port} (admission + watch)`);
  const op = await startLocalOperator({
    kubeconfig,
    stateDir: join(CACHE_DIR, "operator"),
    port,
    logs: "inherit",
  });

  let kubectl = "kubectl";
  try {
    kubectl = kubectlPath();
  } catch {
    // a cluster of the user's own: their kubectl
  }
  console.log(`
jr2-operator is running: admission at https://127.0.0.1:${port}, watching Sandboxes.
Try it:
  export KUBECONFIG=${kubeconfig}
  ${kubectl} apply -f ${join(ROOT, "examples", "sandbox.yaml")}
  ${kubectl} get sbx -w
Ctrl-C stops it and removes its webhook configurations.
`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n==> ${signal}: removing webhook configurations and stopping the module`);
    await op.stop();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  op.child.on("exit", async (code) => {
    if (stopping) return;
    console.error(`the module exited (${code}); removing its webhook configurations`);
    await op.stop();
    process.exit(1);
  });
}

main().catch((err) => {
  console.error(`npm start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
