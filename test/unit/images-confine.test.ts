// jr2-confine in the companions image (effector/confine/, decision 0070): a layer of its own, before
// the bundles, that places the binary at CONFINE_PATH, root-owned and executable by all; the path the
// Effector is told (api/confine.ts) is the path the image has.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CONFINE_IMAGE_PATH } from "../../api/confine";
import { confineEntries } from "../../scripts/images/confine";
import { LAYERS } from "../../scripts/images/main";
import { CONFINE_PATH } from "../../scripts/images/spec";

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "jr2-images-confine-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

test("the companions image lists /app/jr2-confine: its own layer, before the bundles", () => {
  expect(CONFINE_PATH).toBe("/app/jr2-confine");
  expect(CONFINE_IMAGE_PATH).toBe(CONFINE_PATH);
  expect(LAYERS.companions).toEqual(["debian-base", "node-runtime", "companions-confine", "companions-app"]);
  expect(LAYERS.sandbox).not.toContain("companions-confine");
  expect(LAYERS.controller).not.toContain("companions-confine");
});

test("the layer holds the binary at /app/jr2-confine, mode 0755, owned by root, whatever the file's own mode", () => {
  const binary = join(tmp, "jr2-confine-0123456789abcdef");
  writeFileSync(binary, "a stand-in for the binary");
  chmodSync(binary, 0o700);
  expect(confineEntries(binary)).toEqual([
    { path: "app", type: "dir", mode: 0o755, uid: 0, gid: 0 },
    {
      path: "app/jr2-confine",
      type: "file",
      mode: 0o755,
      uid: 0,
      gid: 0,
      size: "a stand-in for the binary".length,
      source: { file: binary },
    },
  ]);
});
