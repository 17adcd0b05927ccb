// Writes api/crd/generated/<plural>.core.jr2.dev.yaml from the zod sources.
import { writeFileSync } from "node:fs";
import { renderAll } from "./crd-yaml";

for (const { file, text } of renderAll()) {
  writeFileSync(file, text);
  console.log(`wrote ${file} (${text.length} bytes)`);
}
