// The API tokens file, read again when it changes, so tokens rotate without a restart
// (docs/decisions/0058-operating-it.md). Its content is polled by digest rather than watched: a
// Secret volume changes by the kubelet swapping its `..data` symlink, which an inotify watch on the
// file itself loses at the first swap, and polling reads the same on every filesystem. A file that
// cannot be read or parsed never locks anyone out: the last good tokens stay in use and the refusal
// is logged once per content, naming the file, the line and the fix, never a token.
import { readFile } from "node:fs/promises";
import { apiTokenChecker, parseApiTokens, type ApiToken, type Principal } from "./tokens";
import type { Log } from "../lib/log";
import { Polled } from "../lib/polled";

/** How often the file's content is compared with what was read last. The kubelet takes up to a
 * minute or so to project a changed Secret; a read of a small file every 2 s adds nothing to that. */
export const API_TOKENS_POLL_MS = 2_000;

/** What a read of the file came to: its tokens, or why it is refused (no token in the message). */
export type TokensVerdict = { tokens: ApiToken[] } | { refused: string };

/** The pure part: a file's text judged. One with no token is refused too: it would refuse everyone. */
export function judgeApiTokens(text: string): TokensVerdict {
  let tokens: ApiToken[];
  try {
    tokens = parseApiTokens(text);
  } catch (err) {
    return { refused: (err as Error).message };
  }
  return tokens.length ? { tokens } : { refused: "the API tokens file holds no token: every request would be refused" };
}

/** How many tokens of each kind: what a log line may say of them. */
export function tokensSummary(tokens: readonly ApiToken[]): { admins: number; tenants: number } {
  const admins = tokens.filter((t) => t.principal.kind === "admin").length;
  return { admins, tenants: tokens.length - admins };
}

/** The error logged for a refused file: the file, why (the line, from parseApiTokens), what is still
 * in use, and the fix. */
export function refusedMessage(file: string, why: string, lastGoodAt: Date, pollMs = API_TOKENS_POLL_MS): string {
  return (
    `${file}: ${why}. The API tokens read at ${lastGoodAt.toISOString()} are still in use: correct the file ` +
    `(a line is "<token>" for an admin or "<token> <tenant>"; in a cluster, the api-tokens key of the ` +
    `Orchestrator's Secret) and it is read again within ${pollMs / 1000} s`
  );
}

export type ApiTokensFileOptions = {
  /** Where the file is (JR2_API_TOKENS_FILE); a symlink is followed at every read. */
  path: string;
  log: Log;
  /** Counted per content read: "ok" when new tokens are in use, "refused" when the last good stay. */
  onRead?: (outcome: "ok" | "refused") => void;
  pollMs?: number;
};

/**
 * The API tokens in use, read from `path` and read again whenever its content changes. `open`
 * refuses a first file that is bad (the Orchestrator does not start on one); afterwards a bad file
 * keeps the tokens in use until a good one replaces it.
 */
export class ApiTokensFile {
  #checker: (candidate: string) => Principal | undefined;
  #lastGoodAt = new Date();
  #refused = false;
  readonly #polled: Polled<Buffer>;

  private constructor(
    private readonly opts: ApiTokensFileOptions,
    tokens: ApiToken[],
    bytes: Buffer,
  ) {
    this.#checker = apiTokenChecker(tokens);
    this.#polled = new Polled({
      read: () => this.#readBytes(),
      bytes: (b) => [b],
      changed: (b) => this.#changed(b),
      initial: bytes,
      pollMs: opts.pollMs ?? API_TOKENS_POLL_MS,
    });
  }

  /** Reads the file, throwing (no token in the message) when it is bad; then polls it. */
  static async open(opts: ApiTokensFileOptions): Promise<ApiTokensFile> {
    const bytes = await readFile(opts.path);
    const verdict = judgeApiTokens(bytes.toString("utf8"));
    if ("refused" in verdict) throw new Error(verdict.refused);
    return new ApiTokensFile(opts, verdict.tokens, bytes);
  }

  /** Who `candidate` speaks for under the tokens in use now (tokens.ts apiTokenChecker). */
  readonly check = (candidate: string): Principal | undefined => this.#checker(candidate);

  /** True while the file as it is now is refused and the last good tokens serve. */
  get refused(): boolean {
    return this.#refused;
  }

  /** One comparison of the file with what was read last; a poll already under way is joined. */
  poll(): Promise<void> {
    return this.#polled.poll();
  }

  close(): void {
    this.#polled.close();
  }

  /** The file's bytes; a file gone or unreadable is a content of its own: refused once, until it changes. */
  async #readBytes(): Promise<Buffer> {
    try {
      return await readFile(this.opts.path);
    } catch (err) {
      return Buffer.from(`${UNREADABLE}${(err as NodeJS.ErrnoException).code ?? "an error"}`);
    }
  }

  #changed(bytes: Buffer): void {
    const { path, log, onRead } = this.opts;
    const text = bytes.toString("utf8");
    if (text.startsWith(UNREADABLE)) return this.#refuse(`it cannot be read (${text.slice(UNREADABLE.length)})`);
    const verdict = judgeApiTokens(text);
    if ("refused" in verdict) return this.#refuse(verdict.refused);
    this.#checker = apiTokenChecker(verdict.tokens);
    this.#lastGoodAt = new Date();
    this.#refused = false;
    onRead?.("ok");
    log({
      level: "info",
      message: "the API tokens file changed: its tokens are in use",
      file: path,
      ...tokensSummary(verdict.tokens),
    });
  }

  #refuse(why: string): void {
    this.#refused = true;
    this.opts.onRead?.("refused");
    this.opts.log({
      level: "error",
      message: refusedMessage(this.opts.path, why, this.#lastGoodAt, this.opts.pollMs),
      file: this.opts.path,
    });
  }
}

/** Marks a read that failed (a NUL never starts a tokens file). */
const UNREADABLE = "\0unreadable ";
