// The keeper runs in its own pod from a bundle (decision 0075): nothing under scripts/ may be in it,
// since a script's command line (`require.main === module`) is the bundle's own main there, and
// one started kubectl in the keeper's pod, which has none. Pure parts live in lib/ (lib/ca-bundle.ts).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const KEEPER = join(__dirname, "..", "..", "keeper");

test("no keeper source imports a script", () => {
  const imports = readdirSync(KEEPER)
    .filter((f) => f.endsWith(".ts"))
    .flatMap((f) =>
      [...readFileSync(join(KEEPER, f), "utf8").matchAll(/from "(\.\.\/scripts\/[^"]+)"/g)].map((m) => `${f}: ${m[1]}`),
    );
  expect(imports).toEqual([]);
});
