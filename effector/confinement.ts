// Whether this node can confine a credentialed command (decision 0072), probed at start: apart from
// effector/command.ts, which runs one, so an idle Effector loads none of the command's code, nor zod
// (docs/decisions/0044-the-custodian-starts-small.md).
import { run } from "./proc";

export type Confinement = { ok: true; abi: number } | { ok: false; reason: string };

/** The PATH a confined child, and the probe, run with. */
export const CHILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The refusal where the kernel cannot confine: the node and why (its termination message, decision 0072). */
export const unconfinedMessage = (node: string, reason: string) =>
  `node ${node} cannot confine a credentialed command: Landlock unavailable (${reason})`;

/** Probes the kernel with `jr2-confine --probe`. */
export async function probeConfinement(confine: string): Promise<Confinement> {
  const r = await run(confine, ["--probe"], { env: { PATH: CHILD_PATH }, timeoutMs: 10_000, maxBytes: 4096 });
  if (r.spawnError) return { ok: false, reason: `${r.spawnError}: jr2-confine is not where JR2_EFFECTOR_CONFINE says` };
  let said: { abi?: number; error?: string } = {};
  try {
    said = JSON.parse(r.stdout.toString().trim().split("\n")[0] ?? "{}") as typeof said;
  } catch {
    // judged by the exit code below
  }
  if (r.code === 0 && typeof said.abi === "number" && said.abi > 0) return { ok: true, abi: said.abi };
  return {
    ok: false,
    reason:
      said.error ?? (r.stderr.toString().trim().slice(0, 500) || `jr2-confine --probe exited ${r.code ?? r.signal}`),
  };
}
