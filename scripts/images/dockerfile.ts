// Reads what a Dockerfile states about its last stage (the instructions the engine-less build must
// agree with, decision 0041): USER, WORKDIR, ENTRYPOINT, CMD, EXPOSE, ENV, COPY, and the Debian
// packages its RUN lines install. Enough of the syntax for this repository's Dockerfiles: line
// continuations, comments, exec-form (JSON) ENTRYPOINT and CMD.

export type DockerfileFacts = {
  from: string;
  user?: string;
  workdir?: string;
  entrypoint?: string[];
  cmd?: string[];
  expose: string[];
  env: Record<string, string>;
  copies: Array<{ from: string[]; to: string; options: string[] }>;
  aptPackages: string[];
  runs: string[];
};

/** The instructions, continuations joined, comments and blank lines gone. */
export function instructions(text: string): Array<{ op: string; args: string }> {
  const out: Array<{ op: string; args: string }> = [];
  let current = "";
  for (const raw of text.split("\n")) {
    const line = raw.trimEnd();
    if (!current && (line.trim().startsWith("#") || !line.trim())) continue;
    if (current && line.trim().startsWith("#")) continue;
    if (line.endsWith("\\")) {
      current += line.slice(0, -1) + " ";
      continue;
    }
    current += line;
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(current) ?? /^\s*([A-Za-z]+)\s*$/.exec(current);
    if (!m) throw new Error(`not a Dockerfile instruction: ${current}`);
    out.push({ op: m[1].toUpperCase(), args: (m[2] ?? "").trim() });
    current = "";
  }
  return out;
}

function execForm(op: string, args: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    throw new Error(`${op} ${args}: only the exec (JSON) form is read here; write ${op} ["..."]`);
  }
  if (!Array.isArray(parsed) || !parsed.every((s) => typeof s === "string"))
    throw new Error(`${op} ${args}: not a list of strings`);
  return parsed;
}

/** The packages of each `apt-get install` in a RUN line (its words up to the next `&&`, flags left out). */
export function aptInstalls(run: string): string[] {
  const out: string[] = [];
  for (const part of run.split(/&&|;/)) {
    const words = part.trim().split(/\s+/);
    const tool = words.findIndex((w) => w === "apt-get" || w === "apt");
    const at = tool < 0 ? -1 : words.indexOf("install", tool);
    if (at < 0) continue;
    out.push(...words.slice(at + 1).filter((w) => w && !w.startsWith("-")));
  }
  return out;
}

/** The facts of the last stage (what the image is). */
export function dockerfileFacts(text: string): DockerfileFacts {
  const all = instructions(text);
  const lastFrom = all.map((i) => i.op).lastIndexOf("FROM");
  if (lastFrom < 0) throw new Error("no FROM instruction");
  const facts: DockerfileFacts = {
    from: all[lastFrom].args.split(/\s+/)[0],
    expose: [],
    env: {},
    copies: [],
    aptPackages: [],
    runs: [],
  };
  for (const { op, args } of all.slice(lastFrom + 1)) {
    if (op === "USER") facts.user = args;
    else if (op === "WORKDIR") facts.workdir = args;
    else if (op === "ENTRYPOINT") {
      facts.entrypoint = execForm(op, args);
      // As in the engine: a new ENTRYPOINT clears the CMD inherited so far.
      facts.cmd = undefined;
    } else if (op === "CMD") facts.cmd = execForm(op, args);
    else if (op === "EXPOSE") facts.expose.push(...args.split(/\s+/).map((p) => (p.includes("/") ? p : `${p}/tcp`)));
    else if (op === "ENV") {
      for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("([^"]*)"|\S*)/g)) facts.env[m[1]] = m[3] ?? m[2];
    } else if (op === "COPY") {
      const words = args.split(/\s+/);
      const options = words.filter((w) => w.startsWith("--"));
      const paths = words.filter((w) => !w.startsWith("--"));
      facts.copies.push({ from: paths.slice(0, -1), to: paths[paths.length - 1], options });
    } else if (op === "RUN") {
      facts.runs.push(args);
      facts.aptPackages.push(...aptInstalls(args));
    }
  }
  return facts;
}
