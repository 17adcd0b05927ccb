// Local process mode refuses a real provider's key unless told to take it (dev/local-model.ts,
// decision 0042): the Agent's bash runs as the developer there, next to the keys. Refused before
// anything is read or written.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LOCAL_MODEL_ENV, startLocalModel } from "../../dev/local-model";

describe("npm start's model in local process mode", () => {
  const dir = mkdtempSync(join(tmpdir(), "jr2-local-model-"));
  const real = { [LOCAL_MODEL_ENV.url]: "http://127.0.0.1:1/v1", [LOCAL_MODEL_ENV.keyFile]: join(dir, "absent") };

  it("refuses a real provider's key, saying why and how to go on", async () => {
    await expect(startLocalModel({ namespace: "default", dir, env: real })).rejects.toThrow(
      /JR2_MODEL_URL names a real model, and local process mode .* not an isolation boundary.*JR2_LOCAL_ALLOW_REAL_KEY=1/,
    );
  });

  it("goes on to read the key when told to take it, or when the Sandboxes run in pods", async () => {
    // The next step reads the key file: its absence is the error that proves the guard let it through.
    for (const o of [{ env: { ...real, [LOCAL_MODEL_ENV.allowRealKey]: "1" } }, { env: real, processMode: false }])
      await expect(startLocalModel({ namespace: "default", dir, ...o })).rejects.toThrow(/which does not exist/);
  });
});
