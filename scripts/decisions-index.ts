// Writes docs/decisions/README.md, the index of the decision records, one line each, from the
// records themselves (their title, date and whether they are amended); `npm run gen:decisions`.
// A unit test holds the committed index equal to what this writes (decision 0036).
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const DECISIONS_DIR = join(__dirname, "..", "docs", "decisions");

/** The index's text for the records in `dir`. Throws naming a record without a status or a date. */
export function decisionsIndex(dir = DECISIONS_DIR): string {
  const rows = readdirSync(dir)
    .filter((f) => /^\d{4}-.+\.md$/.test(f))
    .sort()
    .map((file) => {
      const lines = readFileSync(join(dir, file), "utf8").split("\n");
      const head = lines.slice(1, 8).join(" ");
      const title = lines[0]!.replace(/^#\s*/, "").trim();
      const date = /\*\*Date:\*\* (\d{4}-\d{2}-\d{2})/.exec(head)?.[1];
      const status = /\*\*Status:\*\* ([a-z]+)/.exec(head)?.[1];
      if (!date || !status)
        throw new Error(`${file}: its top needs "**Status:** accepted. **Date:** YYYY-MM-DD." (the index reads them)`);
      const amended = head.includes("**Amended:**") ? ", amended" : "";
      return `- [${title}](${file}) (${date}; ${status}${amended})`;
    });
  return [
    "# Decision records",
    "",
    "One line each: the record, the day it was taken, and whether a later record or a later paragraph",
    "of its own amends it (the record says so at its top). A record states the seed decisions it",
    "follows or departs from; code comments cite these records. Written by `npm run gen:decisions`.",
    "",
    ...rows,
    "",
  ].join("\n");
}

if (require.main === module) writeFileSync(join(DECISIONS_DIR, "README.md"), decisionsIndex());
