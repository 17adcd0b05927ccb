// Reads the held values from their mount (one file per value, as a Secret volume lays them out),
// only the files the config names. A missing or unusable file is reported by its name and the
// fix, never by its content; the Custodian stays unready until every one loads.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { CustodianConfig } from "../api/custodian-config";
import { heldValueOf, heldValueProblem } from "./rules";

export type LoadedValues = { ok: true; values: Map<string, string> } | { ok: false; problems: string[] };

/** The value files a config names: the Sandbox token's (with an Orchestrator) and each held one's. */
export const valueFilesOf = (config: CustodianConfig): string[] => [
  ...new Set([...(config.orchestrator ? [config.orchestrator.token] : []), ...config.held.map((h) => h.value)]),
];

async function readOne(dir: string, name: string): Promise<{ value: string } | { problem: string }> {
  let text: string;
  try {
    text = await readFile(join(dir, name), "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT"
      ? { problem: `${name}: no such file in ${dir}: mount the Secret key ${name} there` }
      : { problem: `${name}: cannot be read (${code ?? "error"})` };
  }
  const value = heldValueOf(text);
  const problem = heldValueProblem(value);
  return problem ? { problem: `${name}: the value ${problem}` } : { value };
}

/** Every value the config names, or every problem found. */
export async function loadValues(dir: string, config: CustodianConfig): Promise<LoadedValues> {
  const names = valueFilesOf(config);
  const read = await Promise.all(names.map((n) => readOne(dir, n)));
  const problems = read.flatMap((r) => ("problem" in r ? [r.problem] : []));
  if (problems.length) return { ok: false, problems };
  return { ok: true, values: new Map(names.map((n, i) => [n, (read[i] as { value: string }).value])) };
}
