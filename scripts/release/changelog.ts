// CHANGELOG.md in the Keep a Changelog format (decision 0073): a release's entry is the
// `[Unreleased]` section, with a line for each decision record added or amended since the previous
// release that the section does not already name (from the decisions index and git history), so
// an entry never misses a decision. Pure but for the git and file reads in `changelogInputs`.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

export type DecisionRow = { number: string; title: string; file: string; amended: boolean };

/** The records the decisions index lists (docs/decisions/README.md, `npm run gen:decisions`). */
export function decisionRows(index: string): DecisionRow[] {
  const rows: DecisionRow[] = [];
  for (const m of index.matchAll(/^- \[(\d{4})\. (.+)\]\((\d{4}-[^)]+\.md)\) \([^;]+; [a-z]+(, amended)?\)$/gm))
    rows.push({ number: m[1], title: m[2], file: m[3], amended: !!m[4] });
  return rows;
}

export const HEADER = [
  "# Changelog",
  "",
  "Every release of jr2-operator, newest first. The format is [Keep a Changelog](https://keepachangelog.com/en/1.1.0/)",
  "and versions follow [Semantic Versioning](https://semver.org/spec/v2.0.0.html). Each entry names the",
  "decision records (docs/decisions/) that explain it; `npm run release` adds a line for any record added or",
  "amended since the previous release that the entry does not already name.",
  "",
].join("\n");

const decisionLine = (d: DecisionRow) => `- ${d.title} ([decision ${d.number}](docs/decisions/${d.file}))`;

/** The sections of a changelog: the text before the first `## [`, and each release section. */
export function sections(text: string): { head: string; parts: Array<{ version: string; body: string }> } {
  const chunks = text.split(/^(?=## \[)/m);
  const head = chunks[0].startsWith("## [") ? "" : chunks.shift()!;
  return {
    head,
    parts: chunks.map((c) => ({ version: /^## \[([^\]]+)\]/.exec(c)![1], body: c })),
  };
}

/** What an entry gains from history: decisions added since the previous release, and those amended. */
export type Since = { added: DecisionRow[]; amended: DecisionRow[]; commits: number; from?: string; to: string };

/**
 * The changelog with an entry for `version` dated `date`: the one it has, or its `[Unreleased]`
 * section's lines moved under `## [version] - date` (a new empty `[Unreleased]` above it), with a
 * line for each decision of `since` the entry does not name. Throws when a version's entry is there
 * twice.
 */
export function withRelease(text: string, version: string, date: string, since: Since): string {
  const { head, parts } = sections(text || HEADER);
  const existing = parts.filter((p) => p.version === version);
  if (existing.length > 1) throw new Error(`CHANGELOG.md has two entries for ${version}: keep one`);
  if (existing.length === 1) return text;
  const unreleased = parts.find((p) => p.version === "Unreleased");
  const body = unreleased ? unreleased.body.replace(/^## \[Unreleased\][^\n]*\n/, "") : "";
  const named = (d: DecisionRow) => body.includes(`decision ${d.number}`) || body.includes(d.file);
  const added = since.added.filter((d) => !named(d)).map(decisionLine);
  const amended = since.amended.filter((d) => !named(d)).map(decisionLine);
  // The entry's subsections (`### Added`, ...), each line added at the end of its own.
  const subs = body.trim().split(/^(?=### )/m);
  const intro = subs[0]?.startsWith("### ") ? "" : (subs.shift() ?? "");
  const blocks = new Map(subs.map((b) => [/^### (.+)/.exec(b)![1].trim(), b.trim()]));
  const addTo = (heading: string, lines: string[]) => {
    if (!lines.length) return;
    const had = blocks.get(heading);
    blocks.set(heading, had ? `${had}\n${lines.join("\n")}` : `### ${heading}\n\n${lines.join("\n")}`);
  };
  addTo("Added", added);
  addTo("Changed", amended);
  const range = since.from ? `${since.from}..${since.to}` : `up to ${since.to}`;
  const entry = [intro.trim(), ...blocks.values(), `Built from ${since.commits} commits (${range}).`]
    .filter(Boolean)
    .join("\n\n");
  const rest = parts.filter((p) => p.version !== "Unreleased").map((p) => p.body);
  return [
    head.trimEnd() + "\n\n",
    "## [Unreleased]\n\n",
    `## [${version}] - ${date}\n\n${entry.replace(/\n{3,}/g, "\n\n")}\n\n`,
    ...rest,
  ]
    .join("")
    .trimEnd()
    .concat("\n");
}

const git = (root: string, args: string[]) => {
  const r = spawnSync("git", ["-C", root, ...args], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
};

/** The previous release's tag: the newest `v*` tag reachable from HEAD, if any. */
export function previousTag(root: string, version: string): string | undefined {
  const r = spawnSync("git", ["-C", root, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD"], {
    encoding: "utf8",
  });
  const tag = r.status === 0 ? r.stdout.trim() : "";
  return tag && tag !== `v${version}` ? tag : undefined;
}

/** What git says changed since the previous release: decisions added and amended, commits counted. */
export function changelogInputs(root: string, version: string): Since {
  const rows = decisionRows(readFileSync(join(root, "docs", "decisions", "README.md"), "utf8"));
  const from = previousTag(root, version);
  const to = git(root, ["rev-parse", "--short=12", "HEAD"]);
  const range = from ? [`${from}..HEAD`] : ["HEAD"];
  const files = (filter: string) =>
    new Set(
      git(root, ["log", `--diff-filter=${filter}`, "--name-only", "--format=", ...range, "--", "docs/decisions"])
        .split("\n")
        .filter(Boolean)
        .map((p) => p.split("/").pop()!),
    );
  const added = from ? files("A") : new Set(rows.map((r) => r.file));
  const modified = from ? files("M") : new Set<string>();
  return {
    added: rows.filter((r) => added.has(r.file)),
    amended: rows.filter((r) => r.amended && modified.has(r.file) && !added.has(r.file)),
    commits: Number(git(root, ["rev-list", "--count", ...range])),
    from,
    to,
  };
}
