// jr2-confine on this machine's real kernel (effector/confine/, decision 0070): what a confined
// command may read, write and signal, and that nothing it starts outlives it. Each denial has its
// positive control, the same access unconfined, so a test cannot pass by a command that fails for
// another reason. The files are world-readable and the scratch world-writable, so file permissions
// never decide: Landlock does, for root (no DAC override under Landlock) as for the Sandbox pod's
// unprivileged user. Reading another process's /proc/<pid>/environ is checked as that user: a root
// with CAP_SYS_ADMIN opens it past the ptrace check on this kernel (see effector/confine/main.go).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CONFINE_EXIT, ConfineProbe } from "../../api/confine";
import { SYSTEM_FLAGS, confineBinary, runConfined } from "../support/confine";
import { eventually } from "../support/eventually";

/** The Sandbox pod's user (RUN_UID): jr2-confine and the command without capabilities. */
const USER = 65532;
const PATH_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };

let tmp: string;
let bin: string;
let abi: number;
const at = (...p: string[]) => join(tmp, ...p);
const started: ChildProcess[] = [];

/** Live `sleep <marker>` processes (the marker an unusual duration). */
function withMarker(marker: string): number[] {
  const pids: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${d}/status`, "utf8"))?.[1];
      if (cmd[0] === "sleep" && cmd[1] === marker && state !== "Z") pids.push(Number(d));
    } catch {
      // ended meanwhile
    }
  }
  return pids;
}

/** A sh command run unconfined, as `uid` when given: the positive control. */
const plain = (script: string, o: { uid?: number; env?: NodeJS.ProcessEnv } = {}) =>
  spawnSync("sh", ["-c", script], { encoding: "utf8", uid: o.uid, gid: o.uid, env: o.env ?? PATH_ENV, cwd: tmp });

const confined = (flags: string[], script: string, o: Parameters<typeof runConfined>[3] = {}) =>
  runConfined(bin, [...SYSTEM_FLAGS, ...flags], ["sh", "-c", script], { cwd: tmp, ...o });

beforeAll(() => {
  if (process.getuid?.() !== 0)
    throw new Error("this test runs commands as uid 65532 as well as root: run the integration tier as root");
  tmp = mkdtempSync(join(tmpdir(), "jr2-confine-"));
  chmodSync(tmp, 0o755);
  // A copy the unprivileged user can execute (the cache is under root's home).
  mkdirSync(at("bin"));
  bin = at("bin", "jr2-confine");
  copyFileSync(confineBinary(), bin);
  chmodSync(bin, 0o755);
  for (const d of ["work", "secrets/a", "effector", "scratch"]) mkdirSync(at(d), { recursive: true, mode: 0o755 });
  writeFileSync(at("work", "file.txt"), "hello from work\n", { mode: 0o644 });
  writeFileSync(at("secrets", "a", "token"), "named-token\n", { mode: 0o644 });
  writeFileSync(at("secrets", "a", "other"), "sibling-token\n", { mode: 0o644 });
  writeFileSync(at("effector", "key"), "the-effector-key\n", { mode: 0o644 });
  chmodSync(at("scratch"), 0o777);
  const probe = spawnSync(bin, ["--probe"], { encoding: "utf8" });
  abi = ConfineProbe.parse(JSON.parse(probe.stdout)).abi;
});

afterAll(() => {
  for (const c of started) c.kill("SIGKILL");
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("--probe reports Landlock's ABI version here, one JSON line, exit 0", () => {
  const r = spawnSync(bin, ["--probe"], { encoding: "utf8" });
  expect(r.status).toBe(0);
  expect(r.stdout.trim().split("\n")).toHaveLength(1);
  const probe = ConfineProbe.parse(JSON.parse(r.stdout));
  expect(probe).toEqual({ abi: expect.any(Number) });
  expect(probe.abi).toBeGreaterThanOrEqual(1);
  // The same as the unprivileged user.
  expect(spawnSync(bin, ["--probe"], { encoding: "utf8", uid: USER, gid: USER }).stdout).toBe(r.stdout);
});

describe.each([
  ["root", undefined],
  ["uid 65532", USER],
])("as %s", (_who, uid) => {
  test("reads beneath --ro, and the one file an --ro FILE names; nothing else, the key least", () => {
    const flags = ["--ro", at("work"), "--ro", at("secrets", "a", "token")];
    expect(confined(flags, "cat work/file.txt secrets/a/token", { uid })).toMatchObject({
      status: 0,
      stdout: "hello from work\nnamed-token\n",
    });
    for (const denied of ["effector/key", "secrets/a/other"]) {
      const r = confined(flags, `cat ${denied}`, { uid });
      expect({ denied, status: r.status, stdout: r.stdout, stderr: r.stderr }).toEqual({
        denied,
        status: 1,
        stdout: "",
        stderr: `cat: ${denied}: Permission denied\n`,
      });
      // Positive control: the same user reads it unconfined.
      expect(plain(`cat ${denied}`, { uid }).status).toBe(0);
    }
    // Nor lists a directory it was given only a file of.
    expect(confined(flags, "ls secrets/a", { uid }).status).not.toBe(0);
    expect(plain("ls secrets/a", { uid }).stdout).toBe("other\ntoken\n");
  });

  test("writes, creates, moves and removes beneath --rw; not beneath --ro, not in /tmp", () => {
    const outside = join(tmpdir(), `jr2-confine-not-granted-${process.pid}-${uid ?? 0}`);
    const flags = ["--ro", at("work"), "--rw", at("scratch")];
    const ok = confined(
      flags,
      "mkdir -p scratch/d/e && echo x > scratch/d/f && mv scratch/d/f scratch/d/e/g && cat scratch/d/e/g && rm -r scratch/d",
      { uid },
    );
    expect({ status: ok.status, stdout: ok.stdout, stderr: ok.stderr }).toEqual({
      status: 0,
      stdout: "x\n",
      stderr: "",
    });
    for (const target of [at("work", "new.txt"), outside]) {
      const r = confined(flags, `echo x > ${target}`, { uid });
      expect({ target, status: r.status, denied: /Permission denied/.test(r.stderr) }).toEqual({
        target,
        status: 2,
        denied: true,
      });
      expect(existsSync(target)).toBe(false);
    }
    // Positive control: unconfined, the same user writes in /tmp.
    expect(plain(`echo x > ${outside} && rm ${outside}`, { uid }).status).toBe(0);
  });

  test("cannot signal a process outside its domain (ABI 6 scoping); can its own", () => {
    expect(abi).toBeGreaterThanOrEqual(6);
    const outside = spawn("sleep", ["300"], { uid, gid: uid, stdio: "ignore" });
    started.push(outside);
    const r = confined([], `kill -0 ${outside.pid}`, { uid });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/Operation not permitted/);
    // Positive controls: unconfined it may; confined, a process it started itself.
    expect(plain(`kill -0 ${outside.pid}`, { uid }).status).toBe(0);
    expect(confined([], "sleep 5 & kill -0 $! && kill $!", { uid }).status).toBe(0);
    outside.kill("SIGKILL");
  });
});

test("cannot read an unconfined process's /proc/<pid>/environ; reads its own /proc/self", async () => {
  const secret = `JR2_CONFINE_SECRET=${process.pid}-${Date.now()}`;
  const target = spawn("sleep", ["300"], {
    uid: USER,
    gid: USER,
    stdio: "ignore",
    env: { ...PATH_ENV, JR2_CONFINE_SECRET: secret.split("=")[1] },
  });
  started.push(target);
  await eventually("the target's environ", () =>
    plain(`cat /proc/${target.pid}/environ`, { uid: USER }).stdout.includes(secret) ? true : undefined,
  );
  const r = confined([], `cat /proc/${target.pid}/environ`, { uid: USER });
  expect({ status: r.status, leaked: r.stdout.includes(secret), stderr: r.stderr }).toEqual({
    status: 1,
    leaked: false,
    stderr: `cat: /proc/${target.pid}/environ: Permission denied\n`,
  });
  const self = confined([], "cat /proc/self/status", { uid: USER });
  expect(self.status).toBe(0);
  expect(self.stdout).toMatch(/^NoNewPrivs:\s+1$/m);
  target.kill("SIGKILL");
});

test("cannot connect to an abstract UNIX socket outside its domain (ABI 6 scoping)", async () => {
  expect(abi).toBeGreaterThanOrEqual(6);
  const name = `jr2-confine-test-${process.pid}`;
  const server: Server = createServer((s) => s.end("hi\n"));
  await new Promise<void>((resolve) => server.listen(`\0${name}`, resolve));
  try {
    const connect = `import socket; s = socket.socket(socket.AF_UNIX); s.connect("\\0${name}"); print(s.recv(3).decode(), end="")`;
    // Positive control first: unconfined, python3 connects (the server answers while this test waits).
    const control = spawn("python3", ["-c", connect], { stdio: ["ignore", "pipe", "pipe"], env: PATH_ENV });
    let got = "";
    control.stdout.on("data", (b: Buffer) => (got += b.toString()));
    await new Promise((resolve) => control.once("exit", resolve));
    expect(got).toBe("hi\n");
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const c = spawn(bin, [...SYSTEM_FLAGS, "--", "python3", "-c", connect], {
        stdio: ["ignore", "pipe", "pipe"],
        env: PATH_ENV,
      });
      let stderr = "";
      c.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
      c.once("exit", (code) => resolve({ code, stderr }));
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/PermissionError|Operation not permitted/);
  } finally {
    server.close();
  }
});

test("a command that daemonizes leaves nothing alive: setsid and a double fork, counted as ended", () => {
  const marker = String(900000 + (process.pid % 1000));
  const r = confined(
    ["--rw", at("scratch")],
    `setsid sh -c 'sleep ${marker} & echo $! > scratch/daemon'; (sleep ${marker} &); sleep ${marker} & exit 3`,
    { report: at("report-daemon.json") },
  );
  expect(r.status).toBe(3);
  const daemon = Number(readFileSync(at("scratch", "daemon"), "utf8"));
  expect(daemon).toBeGreaterThan(1);
  expect(existsSync(`/proc/${daemon}`)).toBe(false);
  expect(withMarker(marker)).toEqual([]);
  expect(r.report).toEqual({ exitCode: 3, signal: null, timedOut: false, ended: 3, abi, error: null });
});

test("--timeout: exit 124, the report says timed out, every process it started is gone", () => {
  const marker = String(910000 + (process.pid % 1000));
  const t0 = Date.now();
  const r = confined(["--timeout", "1"], `sleep ${marker} & setsid sleep ${marker} & sleep ${marker}`, {
    report: at("report-timeout.json"),
  });
  expect(Date.now() - t0).toBeLessThan(10_000);
  expect(r.status).toBe(CONFINE_EXIT.timeout);
  expect(withMarker(marker)).toEqual([]);
  // The shell and its three sleeps.
  expect(r.report).toEqual({ exitCode: null, signal: "SIGKILL", timedOut: true, ended: 4, abi, error: null });
});

test("a signal that ends jr2-confine ends the command first", async () => {
  const marker = String(920000 + (process.pid % 1000));
  const run = spawn(bin, [...SYSTEM_FLAGS, "--timeout", "60", "--", "sleep", marker], { stdio: "ignore" });
  started.push(run);
  const exited = new Promise<number | null>((resolve) => run.once("exit", (code) => resolve(code)));
  await eventually("the confined sleep", () => (withMarker(marker).length === 1 ? true : undefined));
  run.kill("SIGTERM");
  expect(await exited).toBe(128 + 15);
  expect(withMarker(marker)).toEqual([]);
});

test("mirrors the command's exit code and signal; stdin is empty, the environment its own, cwd --cwd", () => {
  const rep = at("report-exit.json");
  expect(confined([], "exit 7", { report: rep })).toMatchObject({
    status: 7,
    report: { exitCode: 7, signal: null, timedOut: false, ended: 0, error: null },
  });
  expect(confined([], "kill -TERM $$", { report: rep })).toMatchObject({
    status: 128 + 15,
    report: { exitCode: null, signal: "SIGTERM", error: null },
  });
  expect(confined([], "kill -KILL $$").status).toBe(128 + 9);
  const env = confined(["--ro", at("work"), "--cwd", at("work")], 'cat; echo "$FOO $(pwd)"; cat file.txt', {
    env: { ...PATH_ENV, FOO: "bar" },
  });
  expect(env).toMatchObject({ status: 0, stdout: `bar ${at("work")}\nhello from work\n` });
});

test("its own failures: exit 125, one line starting 'jr2-confine: ', the report's error", () => {
  const rep = at("report-fail.json");
  const cases: Array<[string[], string[], RegExp]> = [
    [["--rw", at("no-such-dir")], ["true"], /^jr2-confine: --rw .*no-such-dir: no such file or directory\n$/],
    [["--cwd", at("no-such-dir")], ["true"], /^jr2-confine: --cwd .*no-such-dir: no such file or directory\n$/],
    [[], ["no-such-command-jr2"], /^jr2-confine: exec no-such-command-jr2: executable file not found in \$PATH\n$/],
    // Found, but not beneath a path it may execute.
    [[], [at("bin", "jr2-confine"), "--probe"], /^jr2-confine: exec .*: permission denied\n$/],
    [["--timeout", "soon"], ["true"], /^jr2-confine: --timeout "soon": not a number of seconds above 0\n$/],
  ];
  for (const [flags, argv, message] of cases) {
    const r = runConfined(bin, [...SYSTEM_FLAGS, ...flags], argv, { cwd: tmp, report: rep });
    expect({ argv, status: r.status, stdout: r.stdout }).toEqual({ argv, status: CONFINE_EXIT.failure, stdout: "" });
    expect(r.stderr).toMatch(message);
    expect(r.report).toEqual({
      exitCode: null,
      signal: null,
      timedOut: false,
      ended: 0,
      abi: expect.any(Number),
      error: r.stderr.slice("jr2-confine: ".length, -1),
    });
  }
  // No `--`: refused too.
  const r = spawnSync(bin, ["true"], { encoding: "utf8" });
  expect(r.status).toBe(CONFINE_EXIT.failure);
  expect(r.stderr).toMatch(/^jr2-confine: /);
  // A missing --rx or --ro is skipped: images differ in their system paths.
  expect(confined(["--rx", at("no-such-dir"), "--ro", at("no-such-file")], "true").status).toBe(0);
});
