// An Agent's working tools (decision 0024): read, write, edit and bash, as pi-agent-core
// `AgentTool`s, confined to one root directory (the Harness's `/work`).
//
// The file tools resolve every path against the root and refuse one that lands outside it once
// symlinks are resolved (`..`, an absolute path elsewhere, a link inside the root pointing out).
// bash runs with the root as its working directory, its own process group (killed whole at the
// timeout or when the turn is aborted) and no stdin. This keeps the tools honest; it is not the
// security boundary: bash can name any path the container lets it, and the container (its mounts,
// its user, its Custodian) is what bounds an Agent. Outputs are cut to a size a model can take, with
// a line saying what was cut.
//
// A tool fails by throwing: pi sends the message to the model as an error tool result.
import { spawn } from "node:child_process";
import { lstat, mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { AgentTool } from "@earendil-works/pi-agent-core";
import { Type, type Static } from "typebox";

export type WorkingToolsOptions = {
  /** The directory the tools work in; must exist. */
  root: string;
  /** bash's default time limit; the model may ask for less or more per call, up to `bashMaxTimeoutMs`.
   * Default 120 s. */
  bashTimeoutMs?: number;
  /** Default 30 min. */
  bashMaxTimeoutMs?: number;
  /** The most characters a tool returns. Default 50,000. */
  maxOutputChars?: number;
  /** bash's environment. Default the Harness's own. */
  env?: NodeJS.ProcessEnv;
};

export const DEFAULT_BASH_TIMEOUT_MS = 120_000;
export const DEFAULT_BASH_MAX_TIMEOUT_MS = 30 * 60_000;
export const DEFAULT_MAX_OUTPUT_CHARS = 50_000;

/** A path that resolves outside the root. */
export class OutsideRoot extends Error {
  constructor(readonly path: string) {
    super(`${path} is outside the working directory`);
    this.name = "OutsideRoot";
  }
}

const within = (root: string, path: string) => {
  const rel = relative(root, path);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};

const errno = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

/** The real path of `path` (relative to the root, or absolute) after every symlink is resolved,
 * refused unless it lies inside the root's real path. A path that does not exist yet (a file to
 * write) is checked through its nearest existing ancestor; a dangling symlink is refused, since
 * writing through it would create its target wherever that is. */
export async function resolveInRoot(root: string, path: string): Promise<string> {
  if (typeof path !== "string" || path === "") throw new Error("the path is empty");
  if (path.includes("\0")) throw new Error("the path contains a NUL byte");
  const realRoot = await realpath(root);
  const target = resolve(realRoot, path);
  if (!within(realRoot, target)) throw new OutsideRoot(path);
  // Walk up to the nearest part that exists, resolve it, and put the missing tail back on.
  const missing: string[] = [];
  let existing = target;
  for (;;) {
    try {
      const real = await realpath(existing);
      const full = missing.length > 0 ? join(real, ...missing.reverse()) : real;
      if (!within(realRoot, full)) throw new OutsideRoot(path);
      return full;
    } catch (err) {
      if (err instanceof OutsideRoot) throw err;
      if (errno(err) !== "ENOENT" && errno(err) !== "ENOTDIR") throw err;
      const link = await lstat(existing).catch(() => undefined);
      if (link?.isSymbolicLink()) throw new Error(`${path} passes through a symlink whose target does not exist`);
      const parent = dirname(existing);
      if (parent === existing) throw new OutsideRoot(path);
      missing.push(basename(existing));
      existing = parent;
    }
  }
}

/** `text`, or its head cut to `max` characters with a line saying how much went. */
export function truncateHead(text: string, max: number, hint = ""): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  return {
    text: `${text.slice(0, max)}\n[truncated: ${text.length - max} more characters${hint}]`,
    truncated: true,
  };
}

/** `text`, or its tail cut to `max` characters with a line saying how much went before it. */
export function truncateTail(text: string, max: number, dropped = 0): { text: string; truncated: boolean } {
  const cut = dropped + Math.max(0, text.length - max);
  if (cut === 0) return { text, truncated: false };
  return { text: `[truncated: the first ${cut} characters are not shown]\n${text.slice(-max)}`, truncated: true };
}

const textResult = <T>(text: string, details: T) => ({ content: [{ type: "text" as const, text }], details });

const ReadParams = Type.Object({
  path: Type.String({ description: "The file, relative to the working directory." }),
  offset: Type.Optional(Type.Integer({ minimum: 1, description: "The first line to read (1-based)." })),
  limit: Type.Optional(Type.Integer({ minimum: 1, description: "How many lines to read." })),
});
const WriteParams = Type.Object({
  path: Type.String({ description: "The file, relative to the working directory." }),
  content: Type.String({ description: "The whole new content of the file." }),
});
const EditParams = Type.Object({
  path: Type.String({ description: "The file, relative to the working directory." }),
  oldText: Type.String({ description: "Text that occurs exactly once in the file, whitespace included." }),
  newText: Type.String({ description: "What replaces it." }),
});
const BashParams = Type.Object({
  command: Type.String({ description: "A bash command line, run in the working directory." }),
  timeout: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: "Seconds before it is killed." })),
});

export type ReadDetails = { path: string; lines: number; truncated: boolean };
export type WriteDetails = { path: string; bytes: number };
export type EditDetails = { path: string };
export type BashDetails = { exitCode: number | null; signal: string | null; timedOut: boolean; truncated: boolean };

export function readTool(options: WorkingToolsOptions): AgentTool<typeof ReadParams, ReadDetails> {
  const max = options.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
  return {
    name: "read",
    label: "Read",
    description: `Read a text file in the working directory. Output past ${max} characters is cut; use offset and limit (lines) for the rest.`,
    parameters: ReadParams,
    async execute(_id, params: Static<typeof ReadParams>) {
      const file = await resolveInRoot(options.root, params.path);
      const text = await readFile(file, "utf8").catch((err: unknown) => {
        if (errno(err) === "EISDIR") throw new Error(`${params.path} is a directory`);
        if (errno(err) === "ENOENT") throw new Error(`${params.path} does not exist`);
        throw err;
      });
      let body = text;
      if (params.offset !== undefined || params.limit !== undefined) {
        const lines = text.split("\n");
        const start = (params.offset ?? 1) - 1;
        if (start >= lines.length) throw new Error(`${params.path} has ${lines.length} lines; offset ${params.offset}`);
        body = lines.slice(start, params.limit === undefined ? undefined : start + params.limit).join("\n");
      }
      const cut = truncateHead(body, max, ": read on with offset and limit");
      return textResult(cut.text, { path: params.path, lines: body.split("\n").length, truncated: cut.truncated });
    },
  };
}

export function writeTool(options: WorkingToolsOptions): AgentTool<typeof WriteParams, WriteDetails> {
  return {
    name: "write",
    label: "Write",
    // It changes what the next call sees: a batch holding it runs in the model's order.
    executionMode: "sequential",
    description: "Write a file in the working directory (its directories are made), replacing any content it had.",
    parameters: WriteParams,
    async execute(_id, params: Static<typeof WriteParams>) {
      const file = await resolveInRoot(options.root, params.path);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, params.content);
      const bytes = Buffer.byteLength(params.content);
      return textResult(`wrote ${bytes} bytes to ${params.path}`, { path: params.path, bytes });
    },
  };
}

export function editTool(options: WorkingToolsOptions): AgentTool<typeof EditParams, EditDetails> {
  return {
    name: "edit",
    label: "Edit",
    // It changes what the next call sees: a batch holding it runs in the model's order.
    executionMode: "sequential",
    description:
      "Replace one exact piece of text in a file of the working directory. oldText must occur exactly once (add surrounding lines to make it unique).",
    parameters: EditParams,
    async execute(_id, params: Static<typeof EditParams>) {
      if (params.oldText === "") throw new Error("oldText is empty: give the exact text to replace");
      const file = await resolveInRoot(options.root, params.path);
      const text = await readFile(file, "utf8").catch((err: unknown) => {
        if (errno(err) === "ENOENT") throw new Error(`${params.path} does not exist`);
        throw err;
      });
      const at = text.indexOf(params.oldText);
      if (at === -1)
        throw new Error(`oldText does not occur in ${params.path} (it must match exactly, whitespace included)`);
      let count = 1;
      for (let i = text.indexOf(params.oldText, at + 1); i !== -1; i = text.indexOf(params.oldText, i + 1)) count++;
      if (count > 1) {
        throw new Error(
          `oldText occurs ${count} times in ${params.path}: include more of the text around it to pick one`,
        );
      }
      // Sliced, not String.replace: `$&` and the like in newText stay as written.
      await writeFile(file, text.slice(0, at) + params.newText + text.slice(at + params.oldText.length));
      return textResult(`replaced 1 occurrence in ${params.path}`, { path: params.path });
    },
  };
}

export function bashTool(options: WorkingToolsOptions): AgentTool<typeof BashParams, BashDetails> {
  const max = options.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
  const defaultTimeout = options.bashTimeoutMs ?? DEFAULT_BASH_TIMEOUT_MS;
  const maxTimeout = options.bashMaxTimeoutMs ?? DEFAULT_BASH_MAX_TIMEOUT_MS;
  return {
    name: "bash",
    label: "Bash",
    // It changes what the next call sees: a batch holding it runs in the model's order.
    executionMode: "sequential",
    description: `Run a bash command line in the working directory; stdout and stderr come back together (the last ${max} characters). It is killed after ${defaultTimeout / 1000} s unless timeout (seconds) says otherwise. A non-zero exit is an error.`,
    parameters: BashParams,
    async execute(_id, params: Static<typeof BashParams>, signal) {
      const cwd = await realpath(options.root);
      const timeoutMs = Math.min(params.timeout !== undefined ? params.timeout * 1000 : defaultTimeout, maxTimeout);
      const run = await runBash(params.command, { cwd, env: options.env ?? process.env, timeoutMs, signal, max });
      const cut = truncateTail(run.output, max, run.dropped);
      const details: BashDetails = {
        exitCode: run.exitCode,
        signal: run.signal,
        timedOut: run.timedOut,
        truncated: cut.truncated,
      };
      if (signal?.aborted) throw new Error(`aborted\n${cut.text}`);
      if (run.timedOut) throw new Error(`${cut.text}\n[killed after ${timeoutMs / 1000} s]`);
      if (run.exitCode !== 0) {
        throw new Error(`${cut.text}\n[exit ${run.exitCode ?? `signal ${run.signal}`}]`);
      }
      return textResult(cut.text === "" ? "(no output)" : cut.text, details);
    },
  };
}

type BashRun = { output: string; dropped: number; exitCode: number | null; signal: string | null; timedOut: boolean };

/** How long output may still arrive after bash exits (a background job holding the pipes open
 * does not hold the call). */
const DRAIN_MS = 200;

/** Runs `bash -c command` in its own process group, collecting stdout and stderr in arrival order
 * and keeping at most about twice `max` characters of it (the tail). The timeout and an abort kill
 * the whole group; a background job it started is otherwise left running. */
function runBash(
  command: string,
  o: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number; signal: AbortSignal | undefined; max: number },
): Promise<BashRun> {
  return new Promise((resolvePromise, reject) => {
    if (o.signal?.aborted) return reject(new Error("aborted before it ran"));
    const child = spawn("bash", ["-c", command], {
      cwd: o.cwd,
      env: o.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let output = "";
    let dropped = 0;
    let timedOut = false;
    const collect = (text: string) => {
      output += text;
      if (output.length > 2 * o.max) {
        dropped += output.length - o.max;
        output = output.slice(-o.max);
      }
    };
    child.stdout.setEncoding("utf8").on("data", collect);
    child.stderr.setEncoding("utf8").on("data", collect);
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, o.timeoutMs);
    o.signal?.addEventListener("abort", killGroup, { once: true });
    child.once("error", (err) => {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", killGroup);
      reject(err);
    });
    child.once("exit", (code, sig) => {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", killGroup);
      const done = () => {
        clearTimeout(drain);
        child.stdout.destroy();
        child.stderr.destroy();
        resolvePromise({ output, dropped, exitCode: code, signal: sig, timedOut });
      };
      const drain = setTimeout(done, DRAIN_MS);
      child.once("close", done);
    });
  });
}

/** The four working tools, confined to `options.root`. */
export function workingTools(options: WorkingToolsOptions): AgentTool[] {
  return [readTool(options), writeTool(options), editTool(options), bashTool(options)] as AgentTool[];
}
