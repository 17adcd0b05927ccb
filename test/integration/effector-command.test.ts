// The Effector's command Effect through the real jr2-confine (decision 0072): the child reads the
// secret its env names and writes its own TMPDIR; it cannot read the Effector's key or another
// secret, nor write /work; a non-zero exit is exit_nonzero, a timeout timeout.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EFFECTOR_PATHS, type EffectorOrder } from "../../api/effector-wire";
import { confineBinary } from "../support/confine";
import {
  effectorDirs,
  newKey,
  signedRequest,
  startEffector,
  writeKey,
  type EffectorDirs,
  type RunningEffector,
} from "../support/effector-fixture";

let d: EffectorDirs;
let key: string;
let fx: RunningEffector;
let root: string;
beforeAll(async () => {
  d = effectorDirs();
  key = newKey();
  writeKey(d, key);
  root = join(d.work, "s", "b");
  mkdirSync(root, { recursive: true });
  for (const s of ["mine", "other"]) {
    mkdirSync(join(d.secrets, s), { recursive: true });
    writeFileSync(join(d.secrets, s, "token"), `${s}-value\n`, { mode: 0o600 });
  }
  fx = await startEffector(d, { JR2_EFFECTOR_CONFINE: confineBinary() });
}, 120_000);
afterAll(() => fx?.stop());

type Answer = {
  state: string;
  result?: { exitCode: number; stdout: string; stderr: string; timedOut: boolean };
  error?: { code: string };
};
const command = async (id: string, script: string, timeoutSeconds = 20) => {
  const order: EffectorOrder = {
    id,
    idempotent: false,
    effect: {
      kind: "command",
      argv: ["sh", "-c", script],
      root,
      cwd: "",
      env: { MINE: { secret: "mine", key: "token" }, PLAIN: "p" },
      timeoutSeconds,
      maxOutputBytes: 4096,
    },
  };
  return (await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(order))).json as Answer;
};

describe("command", () => {
  it("runs confined: its secret and TMPDIR yes; the key, another secret, /work and /tmp no", async () => {
    const a = await command(
      "cmd-1",
      [
        'echo "env=$MINE $PLAIN"',
        `cat ${join(d.secrets, "mine", "token")}`,
        'echo t > "$TMPDIR/x" && echo tmp-ok',
        `cat ${d.keyFile} >/dev/null 2>&1 || echo key-refused`,
        `cat ${join(d.secrets, "other", "token")} >/dev/null 2>&1 || echo other-refused`,
        `touch ${join(root, "w")} 2>/dev/null || echo work-refused`,
        `ls ${join(d.scratch, ".jr2-effects")} >/dev/null 2>&1 || echo memory-refused`,
      ].join("; "),
    );
    expect(a).toMatchObject({ state: "succeeded", result: { exitCode: 0 } });
    const out = a.result!.stdout;
    for (const line of [
      "env=mine-value p",
      "mine-value",
      "tmp-ok",
      "key-refused",
      "other-refused",
      "work-refused",
      "memory-refused",
    ])
      expect(out).toContain(line);
  });

  it("a non-zero exit is exit_nonzero; a timeout is timeout", async () => {
    expect(await command("cmd-2", "exit 7")).toMatchObject({
      state: "failed",
      error: { code: "exit_nonzero" },
      result: { exitCode: 7 },
    });
    expect(await command("cmd-3", "sleep 30", 1)).toMatchObject({
      state: "failed",
      error: { code: "timeout" },
      result: { timedOut: true },
    });
  });
});
