// The texts of decision 0025's three cases, and the Orchestrator's own answers, produced by real
// faults on real loopback sockets (decision 0025): the Harness's real client (harness/picks/pick-client.ts
// sendPick) against servers that refuse, reset after reading the request, hold it until the turn is
// aborted, or cut a 2xx's body; and through the real Custodian process, whose Orchestrator refuses
// connections or resets. Each text is asserted whole, written out here as the decision words it, so a
// drift from the ADR fails here even when the unit table (pick-texts.test.ts) drifts with the module.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { deliveryPath, picksPath } from "../../api/agent-protocol";
import { ORCHESTRATOR_ROUTE } from "../../api/custodian-config";
import { sendPick, type PickOutcome, type PickRequest } from "../../harness/picks/pick-client";
import {
  closedPort,
  closeServer,
  custodianEnv,
  secretValue,
  writeLayout,
  type Layout,
} from "../support/custodian-fixtures";
import { ADR } from "../support/decision-0025-texts";

const ROOT = join(__dirname, "..", "..");
/** tsx as node's loader, in one process: a SIGKILL reaches the Custodian itself (decision 0025's e2e). */
const NODE_TSX = [process.execPath, ["--import", "tsx"]] as const;
const PICK = "propose";
const IID = "ws-1.c1";
const DELIVERY = "d-1";
const TOKEN = secretValue("sandbox-token");

// The Orchestrator's own answers keep their own texts (decision 0025, its Orchestrator's answers).
const OWN = {
  stopping: (pick: string, message: string) =>
    `the pick \`${pick}\` was not taken: the Orchestrator is stopping (${message}) — try it again`,
  outstanding: (pick: string, message: string) =>
    `the pick \`${pick}\` was not taken: another pick of this turn is outstanding (${message}). Do not call \`${pick}\` again before you read that pick's answer.`,
  turnOver: (pick: string, message: string) =>
    `This turn is over (${message}): the workflow answers no pick in it, and the call to \`${pick}\` has no answer. Do not call \`${pick}\` again before you read the next message: it tells you where the workflow is now.`,
};

const POST_PATH = `${ORCHESTRATOR_ROUTE}${picksPath(IID)}`;
const POLL_PATH = `${ORCHESTRATOR_ROUTE}${deliveryPath(IID, DELIVERY)}`;
const RECEIPT = JSON.stringify({ outstanding: true, deliveryId: DELIVERY });

// ---------------------------------------------------------------------------------------------
// Loopback servers that misbehave on cue

type Seen = { method: string; path: string; authorization?: string; body: string };
type Handler = (seen: Seen, req: http.IncomingMessage, res: http.ServerResponse) => void;

type Fault = {
  url: string;
  seen: Seen[];
  /** Resolves once the server has read the `n`th request whole (1-based): the request was sent. */
  read: (n: number) => Promise<Seen>;
  close: () => Promise<void>;
};

/** An HTTP server on 127.0.0.1 that reads each request whole, records it, then does what the handler says. */
async function faultServer(handler: Handler): Promise<Fault> {
  const seen: Seen[] = [];
  const waiters: Array<{ n: number; resolve: (s: Seen) => void }> = [];
  const server = http.createServer((req, res) => {
    req.socket.on("error", () => undefined);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const s: Seen = {
        method: req.method ?? "",
        path: (req.url ?? "").split("?")[0]!,
        authorization: req.headers.authorization,
        body: Buffer.concat(chunks).toString(),
      };
      seen.push(s);
      for (const w of waiters.filter((w) => w.n === seen.length)) w.resolve(s);
      handler(s, req, res);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const faults: Fault = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    read: (n) =>
      n <= seen.length ? Promise.resolve(seen[n - 1]!) : new Promise((resolve) => waiters.push({ n, resolve })),
    close: () => closeServer(server),
  };
  return faults;
}

/** A fault server for one test: closed after it. */
const opened: Fault[] = [];
async function orchestratorFor(handler: Handler): Promise<Fault> {
  const f = await faultServer(handler);
  opened.push(f);
  return f;
}
afterEach(async () => {
  await Promise.all(opened.splice(0).map((f) => f.close()));
});

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(typeof body === "string" ? body : JSON.stringify(body));
};
const error = (code: string, message: string) => ({ error: { code, message } });
/** The connection reset after the request was read whole: the request was sent, no answer came. */
const reset = (_: Seen, req: http.IncomingMessage) => req.socket.resetAndDestroy();
/** Read and never answered (the server's close ends it). */
const hold = () => undefined;

/** The same pick each time; the turn's signal and the base url are the test's. */
function pick(
  custodianUrl: string,
  signal: AbortSignal = new AbortController().signal,
  more: Partial<PickRequest> = {},
) {
  return sendPick({
    custodianUrl,
    iid: IID,
    pick: PICK,
    args: { summary: "wrote f.txt" },
    submissionId: "s1",
    callId: "call-1",
    signal,
    retryDelayMs: () => 1,
    ...more,
  });
}

/** How the Harness aborts a turn (harness/agents/host.ts), and the signal a Menu tool's pick gets
 * (pi-runner.ts: the tool call's own signal joined with the turn's). */
const ORCHESTRATOR_ABORT = new Error("aborted by the Orchestrator");
function harnessSignals() {
  const turn = new AbortController();
  const call = new AbortController(); // pi's run controller: the tool call's signal
  turn.signal.addEventListener("abort", () => call.abort(), { once: true }); // pi-runner's onAbort
  return { turn, signal: AbortSignal.any([call.signal, turn.signal]) };
}

const failure = (text: string, isError: boolean) => ({ answered: false, text, isError });
const expectOutcome = (outcome: PickOutcome, text: string, isError: boolean) =>
  expect({ answered: outcome.answered, text: outcome.text, isError: outcome.isError }).toEqual(failure(text, isError));

// ---------------------------------------------------------------------------------------------
// The real Custodian, as a process: one whose Orchestrator refuses connections, one whose
// Orchestrator (a fault server here) resets after reading the request.

type Running = { child: ChildProcess; url: string; layout: Layout };
const running: Running[] = [];

/** Lines of a child's stdout until it logs that it listens; the port. */
function listening(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      const m = /"message":"listening","port":(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`exited (${code}) before it listened: ${out.slice(-500)}`)));
  });
}

async function startCustodian(orchestratorUrl: string): Promise<Running> {
  const layout = writeLayout({ version: 1, orchestrator: { url: orchestratorUrl } }, { JR2_SANDBOX_TOKEN: TOKEN });
  const child = spawn(NODE_TSX[0], [...NODE_TSX[1], join(ROOT, "custodian", "main.ts")], {
    cwd: ROOT,
    env: custodianEnv(layout),
    stdio: ["ignore", "pipe", "inherit"],
  });
  const r: Running = { child, url: "", layout };
  running.push(r);
  r.url = `http://127.0.0.1:${await listening(child)}`;
  return r;
}

let refusedPort: number;
let viaRefused: Running;
let resettingOrchestrator: Fault;
let viaResetting: Running;

beforeAll(async () => {
  refusedPort = await closedPort();
  resettingOrchestrator = await faultServer(reset);
  [viaRefused, viaResetting] = await Promise.all([
    startCustodian(`http://127.0.0.1:${refusedPort}`),
    startCustodian(resettingOrchestrator.url),
  ]);
});

afterAll(async () => {
  for (const { child, layout } of running) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    }
    rmSync(layout.dir, { recursive: true, force: true });
  }
  await resettingOrchestrator?.close();
});

// ---------------------------------------------------------------------------------------------

describe("a pick's POST that gets no receipt (decision 0025's three cases)", () => {
  it("a refused connection never reached the Orchestrator: the call fails, try it again", async () => {
    const port = await closedPort();
    const outcome = await pick(`http://127.0.0.1:${port}`);
    expectOutcome(outcome, ADR.neverReached(`connect ECONNREFUSED 127.0.0.1:${port}`), true);
  });

  it("the real Custodian's 502 unreachable (its Orchestrator refuses) never reached it, in the Custodian's words", async () => {
    const outcome = await pick(viaRefused.url);
    expectOutcome(
      outcome,
      ADR.neverReached(`the Custodian could not reach it (connect ECONNREFUSED 127.0.0.1:${refusedPort})`),
      true,
    );
  });

  it("a reset after the request was sent, the turn going on: not known, the call's answer (not an error)", async () => {
    const orchestrator = await orchestratorFor(reset);
    const outcome = await pick(orchestrator.url);
    // The pick did arrive whole: "never reached" would be a lie.
    expect(orchestrator.seen).toEqual([expect.objectContaining({ method: "POST", path: POST_PATH })]);
    expect(JSON.parse(orchestrator.seen[0]!.body)).toMatchObject({ pick: PICK, callId: "call-1" });
    expectOutcome(outcome, ADR.unknown(PICK, "read ECONNRESET"), false);
  });

  it("the same reset behind the real Custodian (its bare 502): not known", async () => {
    const before = resettingOrchestrator.seen.length;
    const outcome = await pick(viaResetting.url);
    // The Custodian forwarded it once, with the Sandbox token, and did not retry a request it sent.
    expect(resettingOrchestrator.seen.slice(before)).toEqual([
      expect.objectContaining({
        method: "POST",
        path: picksPath(IID),
        authorization: `Bearer ${TOKEN}`,
      }),
    ]);
    expectOutcome(
      outcome,
      ADR.unknown(PICK, "HTTP 502: the upstream failed after the request may have reached it (read ECONNRESET)"),
      false,
    );
  });

  it("the turn aborted while the POST is held: not known, the turn ended while the call waited", async () => {
    const orchestrator = await orchestratorFor(hold);
    const turn = new AbortController();
    const outcome = pick(orchestrator.url, turn.signal);
    await orchestrator.read(1);
    turn.abort();
    expectOutcome(await outcome, ADR.unknownAfterAbort(PICK, "This operation was aborted"), false);
  });

  it("the same, aborted as the Harness aborts a turn (its reason, through the tool call's own signal)", async () => {
    const orchestrator = await orchestratorFor(hold);
    const { turn, signal } = harnessSignals();
    const outcome = pick(orchestrator.url, signal);
    await orchestrator.read(1);
    turn.abort(ORCHESTRATOR_ABORT);
    // The joined signal follows the turn before the turn's abort listeners run (Node 24 follows the
    // DOM standard's order: dependent signals first), so the detail is the turn's own reason, not
    // the reasonless abort pi's listener then gives the call.
    expectOutcome(await outcome, ADR.unknownAfterAbort(PICK, ORCHESTRATOR_ABORT.message), false);
  });

  it("a 2xx whose body is cut: the pick reached the workflow and its answer did not reach the Agent", async () => {
    const orchestrator = await orchestratorFor((_, req, res) => {
      // The head promises 200 bytes; a part of the receipt goes, then the connection ends.
      res.writeHead(200, { "content-type": "application/json", "content-length": "200" });
      res.write(RECEIPT.slice(0, 12), () => req.socket.destroy());
    });
    const outcome = await pick(orchestrator.url);
    expectOutcome(outcome, ADR.reachedUnread(PICK, "other side closed"), false);
  });
});

describe("the pick's delivery, after its receipt", () => {
  it("the turn aborted while a poll is held: reached, and the turn ended before the Agent read its answer", async () => {
    const orchestrator = await orchestratorFor((s, _, res) => (s.method === "POST" ? json(res, 200, RECEIPT) : hold()));
    const turn = new AbortController();
    const taken: string[] = [];
    const outcome = pick(orchestrator.url, turn.signal, { onOutstanding: (d) => taken.push(d) });
    expect(await orchestrator.read(2)).toMatchObject({ method: "GET", path: POLL_PATH });
    turn.abort();
    expectOutcome(await outcome, ADR.reachedUnreadAfterAbort(PICK), false);
    expect(taken).toEqual([DELIVERY]);
  });

  it("the same, aborted as the Harness aborts a turn", async () => {
    const orchestrator = await orchestratorFor((s, _, res) => (s.method === "POST" ? json(res, 200, RECEIPT) : hold()));
    const { turn, signal } = harnessSignals();
    const outcome = pick(orchestrator.url, signal);
    await orchestrator.read(2);
    turn.abort(ORCHESTRATOR_ABORT);
    expectOutcome(await outcome, ADR.reachedUnreadAfterAbort(PICK), false);
  });

  it("polls that reset are retried, never the pick: the third poll's answer is the call's", async () => {
    let polls = 0;
    const orchestrator = await orchestratorFor((s, req, res) => {
      if (s.method === "POST") return json(res, 200, RECEIPT);
      if (++polls <= 2) return reset(s, req);
      json(res, 200, { state: "answered", answer: "approved: go on" });
    });
    const outcome = await pick(orchestrator.url);
    expect(outcome).toEqual({ answered: true, text: "approved: go on", isError: false });
    expect(orchestrator.seen.map((s) => `${s.method} ${s.path}`)).toEqual([
      `POST ${POST_PATH}`,
      `GET ${POLL_PATH}`,
      `GET ${POLL_PATH}`,
      `GET ${POLL_PATH}`,
    ]);
  });

  it("polls a stopping Orchestrator answers 503 are retried, and a hold that ends outstanding is no failure", async () => {
    let polls = 0;
    const orchestrator = await orchestratorFor((s, _, res) => {
      if (s.method === "POST") return json(res, 200, RECEIPT);
      polls++;
      if (polls <= 2) return json(res, 503, error("stopping", "the Orchestrator is stopping"));
      if (polls === 3) return json(res, 200, { state: "outstanding" });
      json(res, 200, { state: "answered", answer: "rejected: say why" });
    });
    const outcome = await pick(orchestrator.url);
    expect(outcome).toEqual({ answered: true, text: "rejected: say why", isError: false });
    expect(orchestrator.seen.filter((s) => s.method === "POST")).toHaveLength(1);
    expect(orchestrator.seen.filter((s) => s.method === "GET")).toHaveLength(4);
  });
});

describe("the Orchestrator's own answers keep their own texts", () => {
  const refusing = (status: number, code: string, message: string) =>
    orchestratorFor((s, _, res) => (s.method === "POST" ? json(res, status, error(code, message)) : hold()));

  it("503 to the POST: a stopping Orchestrator did not take the pick, try it again", async () => {
    const orchestrator = await refusing(503, "stopping", "the Orchestrator is stopping");
    expectOutcome(await pick(orchestrator.url), OWN.stopping(PICK, "the Orchestrator is stopping"), true);
  });

  it("409 to the POST: another pick of the turn is outstanding", async () => {
    const message = `the pick "review" of this turn (conversation ${IID}) is still outstanding: one pick waits for the Machine at a time in a turn; "${PICK}" was not taken`;
    const orchestrator = await refusing(409, "pick_outstanding", message);
    expectOutcome(await pick(orchestrator.url), OWN.outstanding(PICK, message), true);
  });

  it("404 to the POST: the turn is over, the call fails", async () => {
    const orchestrator = await refusing(404, "not_found", `no turn of conversation ${IID} is running`);
    expectOutcome(await pick(orchestrator.url), OWN.turnOver(PICK, `no turn of conversation ${IID} is running`), true);
  });

  it("404 to a poll: the turn is over, the call's answer (the pick was taken), and no further poll", async () => {
    const message = `no pick with delivery "${DELIVERY}" in conversation ${IID}`;
    const orchestrator = await orchestratorFor((s, _, res) =>
      s.method === "POST" ? json(res, 200, RECEIPT) : json(res, 404, error("not_found", message)),
    );
    expectOutcome(await pick(orchestrator.url), OWN.turnOver(PICK, message), false);
    expect(orchestrator.seen.map((s) => s.method)).toEqual(["POST", "GET"]);
  });
});
