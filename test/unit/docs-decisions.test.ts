// The decision records a reader can open: each has a status and a date at its top and a line in
// the index, and every record the code cites exists (decision 0036).
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { decisionsIndex } from "../../scripts/decisions-index";

const ROOT = join(__dirname, "..", "..");
const DIR = join(ROOT, "docs", "decisions");
const records = readdirSync(DIR).filter((f) => /^\d{4}-.+\.md$/.test(f));
const index = readFileSync(join(DIR, "README.md"), "utf8");

describe("the decision records", () => {
  it.each(records)("%s has a status and a date at its top and a line in the index", (file) => {
    const head = readFileSync(join(DIR, file), "utf8").split("\n").slice(0, 8).join("\n");
    expect(head).toMatch(/\*\*Status:\*\* (accepted|superseded|proposed)/);
    expect(head).toMatch(/\*\*Date:\*\* \d{4}-\d{2}-\d{2}/);
    expect(index).toContain(`](${file})`);
  });

  it("the index is what `npm run gen:decisions` writes from the records", () => {
    expect(index).toBe(decisionsIndex(DIR));
  });

  it("every record the code and the docs cite exists", () => {
    const numbers = new Set(records.map((f) => f.slice(0, 4)));
    const text = execFileSync(
      "git",
      ["grep", "-hoiE", "decisions? [0-9]{4}(, [0-9]{4})*", "--", "*.ts", "*.md", "*.mjs", "*.sh"],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
    const cited = new Set([...text.matchAll(/[0-9]{4}/g)].map((m) => m[0]));
    expect([...cited].filter((n) => !numbers.has(n)).sort()).toEqual([]);
  });

  it("code comments cite decisions, not a seed, a seed's ADR or an issue a reader cannot open", () => {
    const grep = spawnSync(
      "git",
      [
        "grep",
        "-nE",
        "-i",
        "seed 00[0-9]|issue [0-9]+|ADR-[0-9]+",
        "--",
        "*.ts",
        "*.mjs",
        "*.cjs",
        "*.sh",
        ":!api/crd/generated",
      ],
      { cwd: ROOT, encoding: "utf8" },
    );
    expect(grep.status).toBe(1); // git grep: 1 is "nothing found"
    expect(grep.stdout).toBe("");
  });
});
