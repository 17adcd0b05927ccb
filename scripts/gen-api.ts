// Writes docs/api/openapi.json and docs/api/errors.md from the route table, the body schemas and
// the error catalogue (scripts/api-docs.ts).
import { mkdirSync, writeFileSync } from "node:fs";
import { API_DOCS_DIR, renderApiDocs } from "./api-docs";

mkdirSync(API_DOCS_DIR, { recursive: true });
for (const { file, text } of renderApiDocs()) {
  writeFileSync(file, text);
  console.log(`wrote ${file} (${text.length} bytes)`);
}
