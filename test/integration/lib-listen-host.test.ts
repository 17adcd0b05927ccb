// Where a companion's server binds (lib/http-json.ts listenHost) and the local module's preload
// (dev/loopback.cjs): loopback outside a pod, every interface in one, a stated address wins.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { listenHost } from "../../lib/http-json";

describe("listenHost", () => {
  it("binds loopback outside a pod", () => {
    expect(listenHost(undefined, {})).toBe("127.0.0.1");
    expect(listenHost("", {})).toBe("127.0.0.1");
  });

  it("binds every interface in a pod (the kubelet sets KUBERNETES_SERVICE_HOST)", () => {
    expect(listenHost(undefined, { KUBERNETES_SERVICE_HOST: "10.96.0.1" })).toBe("0.0.0.0");
  });

  it("takes a stated address over either default", () => {
    expect(listenHost("::1", {})).toBe("::1");
    expect(listenHost("0.0.0.0", {})).toBe("0.0.0.0");
    expect(listenHost("127.0.0.1", { KUBERNETES_SERVICE_HOST: "10.96.0.1" })).toBe("127.0.0.1");
  });
});

describe("dev/loopback.cjs", () => {
  const preload = join(__dirname, "..", "..", "dev", "loopback.cjs");
  const boundAddress = (script: string, env: Record<string, string> = {}) =>
    execFileSync(process.execPath, ["--require", preload, "-e", script], {
      encoding: "utf8",
      env: { PATH: process.env.PATH, ...env },
    }).trim();
  const serve = (listenArgs: string) =>
    `const s = require("node:net").createServer(); s.listen(${listenArgs}, () => { console.log(s.address().address); s.close(); });`;

  it("binds a server given only a port to loopback", () => {
    expect(boundAddress(serve("0"))).toBe("127.0.0.1");
  });

  it("leaves a stated address alone", () => {
    expect(boundAddress(serve('0, "0.0.0.0"'))).toBe("0.0.0.0");
  });
});
