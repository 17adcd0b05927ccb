// The Harness's read of a conversation's Allowed picks at a step boundary (decision 0025, the
// restated Turn part; decision 0025): a GET to the Orchestrator through the pod's Custodian, which
// adds the Sandbox token. A pull, and lossy by design: a read that fails or is slow leaves the
// turn's current list in place and the next step boundary reads again, so it never holds a step up
// for long nor ends a turn.
import { request } from "undici";
import { Allowed, allowedPath } from "../../api/agent-protocol";
import { ORCHESTRATOR_ROUTE } from "../../api/custodian-config";

/** How long one read may take before the step goes on with the list it has. */
export const ALLOWED_READ_MS = 5_000;

export type AllowedRead = { ok: true; allowed: string[] } | { ok: false; reason: string };

export async function readAllowed(p: {
  custodianUrl: string;
  iid: string;
  /** The running turn: a list the Orchestrator keeps for another turn is not this one's. */
  submissionId: string;
  signal?: AbortSignal;
}): Promise<AllowedRead> {
  const signal = p.signal
    ? AbortSignal.any([p.signal, AbortSignal.timeout(ALLOWED_READ_MS)])
    : AbortSignal.timeout(ALLOWED_READ_MS);
  try {
    const res = await request(`${p.custodianUrl}${ORCHESTRATOR_ROUTE}${allowedPath(p.iid)}`, { method: "GET", signal });
    const text = await res.body.text();
    if (res.statusCode !== 200) return { ok: false, reason: `the Orchestrator answered ${res.statusCode}` };
    const parsed = Allowed.safeParse(JSON.parse(text));
    if (!parsed.success) return { ok: false, reason: "not an Allowed list" };
    // Before the Orchestrator records a new turn's admission it still answers the previous turn's.
    if (parsed.data.submissionId !== undefined && parsed.data.submissionId !== p.submissionId)
      return { ok: false, reason: "the Allowed picks are another turn's" };
    return { ok: true, allowed: parsed.data.allowed };
  } catch (err) {
    return { ok: false, reason: err instanceof Error ? err.message : String(err) };
  }
}
