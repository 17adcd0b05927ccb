// API tokens rotated without a restart (docs/decisions/0058-operating-it.md): the file's verdicts
// (the pure part), then the API server on a temp tokens file, the file replaced as an editor does
// and as the kubelet does a Secret volume's (its `..data` symlink swapped), the old token refused and
// the new accepted by the same server; a bad file keeping the last good tokens, logged without a token.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ApiTokensFile, judgeApiTokens, refusedMessage, tokensSummary } from "../../orchestrator/api-tokens-file";
import { startOrchestratorServer, type LogEntry, type Workspaces } from "../../orchestrator/http/api-server";
import { OrchestratorMetrics } from "../../orchestrator/orchestrator-metrics";
import { eventually } from "../support/eventually";

const OLD = "old-token-0123456789abcdef0123456789";
const NEW = "new-token-fedcba9876543210fedcba9876";
const TENANT = "tenant-token-00112233445566778899aabb";

describe("judgeApiTokens", () => {
  it("takes a file with tokens", () => {
    expect(judgeApiTokens(`# rotated\n${NEW}\n${TENANT} team-a\n`)).toEqual({
      tokens: [
        { token: NEW, principal: { kind: "admin" } },
        { token: TENANT, principal: { kind: "tenant", tenant: "team-a" } },
      ],
    });
  });

  it("refuses a bad line by its number, without the token", () => {
    const verdict = judgeApiTokens(`${NEW}\n${TENANT} Team_A\n`);
    expect(verdict).toEqual({ refused: expect.stringContaining("line 2") });
    expect(JSON.stringify(verdict)).not.toContain(TENANT);
    expect(judgeApiTokens(`${NEW} team-a extra`)).toEqual({ refused: expect.stringContaining("line 1") });
  });

  it("refuses a file with no token: it would refuse every caller", () => {
    expect(judgeApiTokens("# emptied\n\n")).toEqual({ refused: expect.stringContaining("holds no token") });
    expect(judgeApiTokens("")).toEqual({ refused: expect.stringContaining("holds no token") });
  });
});

describe("what is said of the tokens", () => {
  it("counts them by kind, never naming one", () => {
    const verdict = judgeApiTokens(`${OLD}\n${NEW}\n${TENANT} team-a\n`);
    if (!("tokens" in verdict)) throw new Error("refused");
    expect(tokensSummary(verdict.tokens)).toEqual({ admins: 2, tenants: 1 });
  });

  it("names the file, the reason, what is still in use and the fix", () => {
    const text = refusedMessage("/etc/jr2/secret/api-tokens", "the API tokens file, line 3: ...", new Date(0), 2000);
    expect(text).toContain("/etc/jr2/secret/api-tokens: the API tokens file, line 3");
    expect(text).toContain("read at 1970-01-01T00:00:00.000Z are still in use");
    expect(text).toContain('"<token> <tenant>"');
    expect(text).toContain("read again within 2 s");
  });
});

const workspaces = {
  create: async () => "ws-1",
  list: async () => [],
  ownerOf: () => null,
  get: async () => undefined,
  delete: async () => true,
  subscribe: () => undefined,
} as unknown as Workspaces;

/** Writes `files` as the kubelet writes a Secret volume: a new timestamped directory, a `..data_tmp`
 * symlink to it renamed over `..data` (one atomic step), each key a symlink through `..data`, and the
 * old directory removed. */
async function kubeletWrite(dir: string, files: Record<string, string>, generation: number): Promise<void> {
  const stamp = `..2026_12_06_12_00_0${generation}.${generation}`;
  await mkdir(path.join(dir, stamp));
  for (const [key, text] of Object.entries(files)) await writeFile(path.join(dir, stamp, key), text);
  await symlink(stamp, path.join(dir, "..data_tmp"));
  await rename(path.join(dir, "..data_tmp"), path.join(dir, "..data"));
  for (const key of Object.keys(files))
    await symlink(path.join("..data", key), path.join(dir, key)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "EEXIST") throw e;
    });
  if (generation > 1)
    await rm(path.join(dir, `..2026_12_06_12_00_0${generation - 1}.${generation - 1}`), { recursive: true });
}

describe("the API server on a tokens file that changes", () => {
  let dir: string;
  let file: string;
  let tokens: ApiTokensFile;
  let server: Server;
  let base: string;
  let metrics: OrchestratorMetrics;
  const logs: LogEntry[] = [];
  const reads: Array<"ok" | "refused"> = [];

  /** Starts the server on `file` as main.ts does, polled every 20 ms. */
  async function start(): Promise<void> {
    metrics = new OrchestratorMetrics();
    tokens = await ApiTokensFile.open({
      path: file,
      log: (e) => logs.push(e),
      onRead: (outcome) => {
        reads.push(outcome);
        metrics.apiTokensRead(outcome);
      },
      pollMs: 20,
    });
    server = await startOrchestratorServer({ workspaces, checkToken: tokens.check, metrics: () => "" }, 0, "127.0.0.1");
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  const status = async (token: string) =>
    (await fetch(`${base}/v1/workspaces`, { headers: { authorization: `Bearer ${token}` } })).status;

  /** The next read of a changed file, however many polls it takes (each poll is a timer's, not ours). */
  const nextRead = (after: number) =>
    eventually(`read ${after + 1} of the tokens file`, () => (reads.length > after ? reads[after] : undefined));

  const metric = (sample: string) => {
    const line = metrics
      .render([])
      .split("\n")
      .find((l) => l.startsWith(`${sample} `));
    return Number(line?.split(" ").pop());
  };

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "jr2-api-tokens-"));
    logs.length = 0;
    reads.length = 0;
  });

  afterEach(async () => {
    tokens.close();
    metrics.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
    // No token in any log line, whichever file it came from.
    for (const t of [OLD, NEW, TENANT]) expect(JSON.stringify(logs)).not.toContain(t);
  });

  it("takes a file replaced as an editor replaces it (a new file renamed over it)", async () => {
    file = path.join(dir, "api-tokens");
    await writeFile(file, `${OLD}\n`);
    await start();
    expect([await status(OLD), await status(NEW)]).toEqual([200, 401]);

    await writeFile(`${file}.new`, `${NEW}\n${TENANT} team-a\n`);
    await rename(`${file}.new`, file);
    expect(await nextRead(0)).toBe("ok");
    expect([await status(OLD), await status(NEW), await status(TENANT)]).toEqual([401, 200, 200]);
    expect(logs).toContainEqual(
      expect.objectContaining({
        level: "info",
        file,
        admins: 1,
        tenants: 1,
        message: expect.stringContaining("changed"),
      }),
    );
    expect(metric('jr2_orchestrator_api_tokens_reads_total{result="ok"}')).toBe(1);
  });

  it("takes a Secret volume's new tokens when the kubelet swaps its ..data symlink", async () => {
    await kubeletWrite(dir, { "api-tokens": `${OLD}\n`, "signing-key": "k".repeat(40) }, 1);
    file = path.join(dir, "api-tokens");
    await start();
    expect([await status(OLD), await status(NEW)]).toEqual([200, 401]);

    await kubeletWrite(dir, { "api-tokens": `${NEW}\n`, "signing-key": "k".repeat(40) }, 2);
    expect(await nextRead(0)).toBe("ok");
    expect([await status(OLD), await status(NEW)]).toEqual([401, 200]);

    // Twice: the reader follows the symlink at every read, not the file it first found.
    await kubeletWrite(dir, { "api-tokens": `${OLD}\n${NEW}\n`, "signing-key": "k".repeat(40) }, 3);
    expect(await nextRead(1)).toBe("ok");
    expect([await status(OLD), await status(NEW)]).toEqual([200, 200]);
  });

  it("keeps the last good tokens through a bad file, says so once, and takes the corrected one", async () => {
    await kubeletWrite(dir, { "api-tokens": `${OLD}\n` }, 1);
    file = path.join(dir, "api-tokens");
    await start();

    await kubeletWrite(dir, { "api-tokens": `${NEW}\n${TENANT} Team_A\n` }, 2);
    expect(await nextRead(0)).toBe("refused");
    expect([await status(OLD), await status(NEW)]).toEqual([200, 401]);
    expect(tokens.refused).toBe(true);
    const errors = () => logs.filter((e) => e.level === "error");
    expect(errors()).toEqual([
      expect.objectContaining({
        file,
        message: expect.stringMatching(/^\/.*api-tokens: the API tokens file, line 2: /),
      }),
    ]);
    expect(errors()[0]!.message).toContain("still in use: correct the file");
    expect(metric("jr2_orchestrator_api_tokens_file_refused")).toBe(1);
    expect(metric('jr2_orchestrator_api_tokens_reads_total{result="refused"}')).toBe(1);

    // The same bad content is judged once, however often it is compared.
    await tokens.poll();
    await tokens.poll();
    expect([reads.length, errors().length]).toEqual([1, 1]);

    await kubeletWrite(dir, { "api-tokens": `${NEW}\n${TENANT} team-a\n` }, 3);
    expect(await nextRead(1)).toBe("ok");
    expect([await status(OLD), await status(NEW), await status(TENANT)]).toEqual([401, 200, 200]);
    expect(tokens.refused).toBe(false);
    expect(metric("jr2_orchestrator_api_tokens_file_refused")).toBe(0);
  });

  it("keeps the last good tokens when the file is emptied or gone", async () => {
    file = path.join(dir, "api-tokens");
    await writeFile(file, `${OLD}\n`);
    await start();

    await writeFile(`${file}.new`, "# everyone removed\n");
    await rename(`${file}.new`, file);
    expect(await nextRead(0)).toBe("refused");
    expect(logs.at(-1)!.message).toContain("holds no token");
    expect(await status(OLD)).toBe(200);

    await rm(file);
    expect(await nextRead(1)).toBe("refused");
    expect(logs.at(-1)!.message).toContain("cannot be read (ENOENT)");
    expect(await status(OLD)).toBe(200);
  });

  it("refuses a bad first file, as the Orchestrator's start does, without the token", async () => {
    file = path.join(dir, "api-tokens");
    await writeFile(file, `${OLD} team-a extra\n`);
    const opening = ApiTokensFile.open({ path: file, log: (e) => logs.push(e) });
    await expect(opening).rejects.toThrow("line 1");
    await expect(opening.catch((e: Error) => e.message)).resolves.not.toContain(OLD);
    // afterEach closes what start() made: make one on a good file.
    await writeFile(file, `${OLD}\n`);
    await start();
  });

  it("reads nothing more once closed", async () => {
    file = path.join(dir, "api-tokens");
    await writeFile(file, `${OLD}\n`);
    await start();
    tokens.close();
    await writeFile(file, `${NEW}\n`);
    await tokens.poll();
    expect([reads.length, await status(OLD), await status(NEW)]).toEqual([0, 200, 401]);
  });
});
