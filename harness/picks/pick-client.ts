// A Menu tool call's pick, sent the way decision 0025 says: the pick's POST
// goes to the Orchestrator through the pod's Custodian (which adds the Sandbox token) and answers
// at once, outstanding, with a delivery id; inside the same tool call the Harness long-polls the
// delivery, about 25 s a request, until the Machine answers, with no time bound. A poll is safe to
// repeat, so a reset, a stopping Orchestrator's 503 and a park cost a retry, never the pick. Every
// failure becomes the text of its case (texts.ts). undici for every call (the choice).
import { request } from "undici";
import { Delivery, LONG_POLL_MS, PickReceipt, deliveryPath, picksPath, type PickBody } from "../../api/agent-protocol";
import { ORCHESTRATOR_ROUTE } from "../../api/custodian-config";
import { causeOf, pickText, type PickAnswer, type PickCause } from "./texts";

export type PickRequest = PickBody & {
  /** The Harness's Custodian (JR2_CUSTODIAN_URL). */
  custodianUrl: string;
  iid: string;
  /** The turn's signal: aborted when the turn is (the Orchestrator's abort). */
  signal: AbortSignal;
  /** Told once the pick is taken, with its delivery, and at each poll that finds it outstanding. */
  onOutstanding?: (deliveryId: string) => void;
  /** Between polls that failed (the default grows from 250 ms to 5 s). */
  retryDelayMs?: (attempt: number) => number;
};

/** The tool call's answer: the Machine's, or the text of its case (isError: the call fails). */
export type PickOutcome = { answered: true; text: string; isError: false } | ({ answered: false } & PickAnswer);

export async function sendPick(p: PickRequest): Promise<PickOutcome> {
  const base = `${p.custodianUrl}${ORCHESTRATOR_ROUTE}`;
  const body: PickBody = { pick: p.pick, args: p.args, submissionId: p.submissionId, callId: p.callId };
  const fail = (stage: "post" | "poll", cause: PickCause): PickOutcome => ({
    answered: false,
    ...pickText({ pick: p.pick, stage, turnAborted: p.signal.aborted, cause }),
  });

  // The POST: a receipt, or a failure classified by whether it may have reached the Orchestrator.
  let deliveryId: string;
  try {
    const res = await request(`${base}${picksPath(p.iid)}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: p.signal,
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    const status = res.statusCode;
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      if (status >= 200 && status < 300) return fail("post", { kind: "body-cut", status, detail: messageOf(err) });
      throw err;
    }
    if (status < 200 || status >= 300) {
      const custodian = headerOf(res.headers["x-jr2-custodian"]);
      return fail("post", { kind: "http", status, ...(custodian ? { custodian } : {}), body: jsonOr(text) });
    }
    const receipt = PickReceipt.safeParse(jsonOr(text));
    if (!receipt.success)
      return fail("post", { kind: "body-cut", status, detail: "the receipt is not a pick receipt" });
    deliveryId = receipt.data.deliveryId;
  } catch (err) {
    return fail("post", causeOf(err));
  }
  p.onOutstanding?.(deliveryId);

  // The polls: until answered; a failure costs a retry unless it ends the turn's wait.
  for (let attempt = 0; ; attempt++) {
    if (p.signal.aborted) return fail("poll", { kind: "aborted", message: "the turn was aborted" });
    try {
      const res = await request(`${base}${deliveryPath(p.iid, deliveryId)}?wait=${LONG_POLL_MS}`, {
        method: "GET",
        signal: p.signal,
        headersTimeout: LONG_POLL_MS + 30_000,
        bodyTimeout: 60_000,
      });
      const text = await res.body.text();
      if (res.statusCode === 404) return fail("poll", { kind: "http", status: 404, body: jsonOr(text) });
      if (res.statusCode >= 200 && res.statusCode < 300) {
        const delivery = Delivery.safeParse(jsonOr(text));
        if (delivery.success && delivery.data.state === "answered")
          return { answered: true, text: delivery.data.answer, isError: false };
        if (delivery.success) {
          attempt = -1; // a hold that ended outstanding is no failure
          p.onOutstanding?.(deliveryId);
          continue;
        }
      }
    } catch (err) {
      if (p.signal.aborted) return fail("poll", causeOf(err));
    }
    await sleep((p.retryDelayMs ?? defaultDelay)(attempt), p.signal);
  }
}

const defaultDelay = (attempt: number) => Math.min(250 * 2 ** attempt, 5_000);

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

const headerOf = (h: string | string[] | undefined) => (Array.isArray(h) ? h[0] : h);
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

function jsonOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
