// The Custodian's postStart (orchestrator/workspaces/compose.ts `untilListening`, decision 0063), run
// by the machine's bash as the kubelet runs it in the companions image: it ends once something
// listens on the port, and ends successfully when nothing ever does, after its bound.
import { spawn } from "node:child_process";
import net, { type AddressInfo } from "node:net";
import { untilListening } from "../../orchestrator/workspaces/compose";

const run = (command: string[]) =>
  new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(command[0], command.slice(1), { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stderr }));
  });

const freePort = async () => {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", () => resolve()));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
};

describe("untilListening", () => {
  it("ends, successfully and silently, once the port is bound, not before", async () => {
    const port = await freePort();
    let ended = false;
    const done = run(untilListening(port, 20)).then((r) => ((ended = true), r));
    // Nothing listens yet: the hook keeps the container's start open.
    await new Promise((r) => setTimeout(r, 300));
    expect(ended).toBe(false);
    const server = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()));
    try {
      await expect(done).resolves.toEqual({ code: 0, stderr: "" });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("ends successfully after its bound when nothing ever listens, so it never fails the container", async () => {
    const port = await freePort();
    await expect(run(untilListening(port, 1))).resolves.toEqual({ code: 0, stderr: "" });
  });
});
