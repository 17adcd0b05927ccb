// A conversation's stream log (harness/agents/log.ts): offsets, the long-poll, and the rebuild
// from its file after a restart (a torn last line dropped), on real files in a temp directory; and
// the host's "still working" event for a quiet turn (harness/agents/host.ts).
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentHost } from "../../harness/agents/host";
import { ConversationLog } from "../../harness/agents/log";

const dir = mkdtempSync(join(tmpdir(), "jr2-log-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = () => new ConversationLog(join(dir, `c${n++}`, "coder", "iid-1.jsonl"));
const busy = () => false;
const idle = () => true;

describe("a conversation's stream", () => {
  it("stamps each event with the next offset and reads from any offset", async () => {
    const log = fresh();
    log.append({ kind: "turn", submissionId: "s1" });
    log.append({ kind: "text", text: "hello" });
    log.append({ kind: "end", submissionId: "s1", outcome: "completed", message: "done" });
    expect(log.next).toBe(3);
    const all = await log.read(0, 0, idle);
    expect(all.events.map((e) => [e.offset, e.kind])).toEqual([
      [0, "turn"],
      [1, "text"],
      [2, "end"],
    ]);
    expect(all).toMatchObject({ next: 3, idle: true });
    // An old offset after a reconnect: what followed it, again.
    expect((await log.read(1, 0, idle)).events.map((e) => e.offset)).toEqual([1, 2]);
    expect(log.endOf("s1")).toMatchObject({ outcome: "completed", message: "done" });
    expect(log.startOf("s1")).toBe(0);
  });

  it("holds a read at the end until the next event, and answers it at once", async () => {
    const log = fresh();
    log.append({ kind: "turn", submissionId: "s1" });
    // A hold far past the test's own timeout: a page with the event can only be the append's answer
    // (a hold that ran out answers an empty page). How soon is bench/timings-bench.ts's figure.
    let answered = false;
    const pending = log.read(1, 10 * 60_000, busy).finally(() => (answered = true));
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    log.append({ kind: "working", note: "still working" });
    const page = await pending;
    expect(page.events.map((e) => e.kind)).toEqual(["working"]);
    expect(page.next).toBe(2);
  });

  it("answers an empty page after its hold, and at once when the conversation is idle or the reader leaves", async () => {
    const log = fresh();
    expect(await log.read(0, 30, busy)).toEqual({ events: [], next: 0, idle: false });
    expect(await log.read(0, 60_000, idle)).toEqual({ events: [], next: 0, idle: true });
    const ctl = new AbortController();
    const pending = log.read(0, 60_000, busy, ctl.signal);
    ctl.abort();
    expect((await pending).events).toEqual([]);
  });

  it("clamps an offset past the end to the end", async () => {
    const log = fresh();
    log.append({ kind: "turn", submissionId: "s" });
    expect(await log.read(99, 0, idle)).toEqual({ events: [], next: 1, idle: true });
  });

  it("is rebuilt from its file after a restart, a torn last line dropped", async () => {
    const file = join(dir, "restart", "coder", "iid.jsonl");
    const before = new ConversationLog(file);
    before.append({ kind: "turn", submissionId: "s1" });
    before.append({ kind: "text", text: "partial" });
    appendFileSync(file, '{"kind":"text","offset":2,"at":"2026-'); // the process died mid-write
    const after = new ConversationLog(file);
    expect(after.next).toBe(2);
    expect((await after.read(0, 0, idle)).events.map((e) => e.kind)).toEqual(["turn", "text"]);
    // The next event takes the next whole offset, on a line of its own.
    after.append({ kind: "end", submissionId: "s1", outcome: "aborted" });
    const lines = readFileSync(file, "utf8").trim().split("\n");
    expect(JSON.parse(lines[lines.length - 1]!)).toMatchObject({ kind: "end", offset: 2 });
    expect(new ConversationLog(file).next).toBe(3);
  });
});

describe("a quiet turn", () => {
  it("gets a `working` event while it says nothing, and none after its end", async () => {
    // The runner: quiet until released, so only the heartbeat can write meanwhile.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const host = new AgentHost({
      dir: join(dir, "quiet"),
      workingEveryMs: 20,
      run: async () => {
        await released;
        return { message: "done", history: [] };
      },
    });
    const admitted = host.admit("coder", "q1", { message: "wait", menu: [], allowed: [] });
    const seen = await host.stream("coder", "q1", admitted.offset + 1, 10_000);
    expect(seen.events[0]).toMatchObject({
      kind: "working",
      note: expect.stringMatching(/^still working \(\d+ s since/),
    });
    release();
    let page = await host.stream("coder", "q1", seen.next, 10_000);
    for (const deadline = Date.now() + 10_000; !page.events.some((e) => e.kind === "end"); ) {
      if (Date.now() > deadline) throw new Error("the released turn wrote no end within 10 s");
      page = await host.stream("coder", "q1", page.next, 10_000);
    }
    const after = page.next;
    await new Promise((r) => setTimeout(r, 100)); // five heartbeat periods: none may be written
    expect((await host.stream("coder", "q1", after, 0)).events).toEqual([]);
  });
});
