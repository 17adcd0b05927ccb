// The committed CRD YAML is generated from the zod sources; this fails when the two drift.
import { readFileSync } from "node:fs";
import { renderAll } from "../../scripts/crd-yaml";

describe("generated CRDs", () => {
  it.each(renderAll().map((r) => [r.file.split("/").pop(), r] as const))(
    "%s matches the zod sources (run `npm run gen:crds` to refresh)",
    (_name, { file, text }) => {
      expect(readFileSync(file, "utf8")).toBe(text);
    },
  );
});
