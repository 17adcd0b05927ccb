// The committed API documents (docs/api/, decision 0057) are generated from the route table, the
// body schemas and the error catalogue; this fails when a committed file and the code drift.
import { readFileSync } from "node:fs";
import { renderApiDocs } from "../../scripts/api-docs";
import { openApiDocument } from "../../orchestrator/http/openapi-document";

describe("generated API documents", () => {
  it.each(renderApiDocs().map((r) => [r.file.split("/").pop(), r] as const))(
    "%s matches the code (run `npm run gen:api` to refresh)",
    (_name, { file, text }) => {
      expect(readFileSync(file, "utf8")).toBe(text);
    },
  );

  it("commits the very document the server serves at /v1/openapi.json", () => {
    const committed = JSON.parse(readFileSync(renderApiDocs()[0].file, "utf8")) as unknown;
    expect(committed).toEqual(openApiDocument());
  });
});
