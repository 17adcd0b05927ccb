// The cached kubectl that `npm run cluster -- up` built, for scripts that need one.
import { execFile, execFileSync } from "node:child_process";
import { join } from "node:path";

const CLUSTER = join(__dirname, "cluster", "cluster.sh");

let cached: string | undefined;

/** KUBECTL from the environment, else the control plane's own kubectl. */
export function kubectlPath(): string {
  if (process.env.KUBECTL) return process.env.KUBECTL;
  if (cached) return cached;
  const out = execFileSync("bash", [CLUSTER, "env"], { encoding: "utf8" });
  const line = out.split("\n").find((l) => l.startsWith("KUBECTL="));
  if (!line) throw new Error(`${CLUSTER} env printed no KUBECTL= line: run \`npm run cluster -- up\` first`);
  return (cached = line.slice("KUBECTL=".length).trim());
}

export function run(kubeconfig: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      kubectlPath(),
      args,
      { env: { ...process.env, KUBECONFIG: kubeconfig }, maxBuffer: 64 << 20 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout),
    );
    if (input !== undefined) child.stdin!.end(input);
  });
}

/** Server-side apply of a list of objects. */
export const apply = (kubeconfig: string, objects: unknown[]) =>
  run(
    kubeconfig,
    ["apply", "--server-side", "--force-conflicts", "--field-manager=jr2-local", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  );

/** Who the API server says this kubeconfig is (a SelfSubjectReview). */
export async function whoAmI(kubeconfig: string): Promise<string> {
  const name = (await run(kubeconfig, ["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"])).trim();
  if (!name) throw new Error("kubectl auth whoami named no user");
  return name;
}
