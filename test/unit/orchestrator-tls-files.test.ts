// The API's TLS certificate renewed without a restart (docs/decisions/0058-operating-it.md): the
// API server over https on temp PEM files, the files replaced as the kubelet replaces a Secret
// volume's, and the next connection gets the new certificate; a pair Node would not serve keeps the
// one served, logged once without the key.
import https from "node:https";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { servingCertificate, type ServingCertificate } from "../../lib/serving-certificate";
import { startOrchestratorServer, type LogEntry, type Workspaces } from "../../orchestrator/http/api-server";
import { TlsFiles, tlsPairProblem } from "../../orchestrator/tls-files";
import { eventually } from "../support/eventually";

const names = { dnsNames: ["jr2-orchestrator.jr2-system.svc"], ips: ["127.0.0.1"] };

describe("tlsPairProblem", () => {
  const a = servingCertificate(names);
  const b = servingCertificate(names);

  it("takes a certificate with its own key", () => {
    expect(tlsPairProblem({ cert: a.certPem, key: a.keyPem })).toBeUndefined();
  });

  it("refuses a certificate already ended", () => {
    const ended = servingCertificate(names, 1, Date.now() - 10 * 86_400_000);
    expect(tlsPairProblem({ cert: ended.certPem, key: ended.keyPem })).toMatch(/^the certificate ended at /);
  });

  it("refuses a key that is not the certificate's, and text that is not PEM, without the key", () => {
    const mismatch = tlsPairProblem({ cert: a.certPem, key: b.keyPem });
    expect(mismatch).toBe("the key is not the certificate's");
    expect(tlsPairProblem({ cert: "", key: a.keyPem })).toBeDefined();
    expect(tlsPairProblem({ cert: a.certPem, key: "not a key" })).toBeDefined();
    expect(mismatch).not.toContain(b.keyPem.split("\n")[1]);
  });
});

/** A Secret volume as the kubelet writes it: a new directory, `..data` swapped to it in one rename. */
async function kubeletWrite(dir: string, pair: ServingCertificate, generation: number): Promise<void> {
  const stamp = `..2026_12_06_13_00_0${generation}`;
  await mkdir(path.join(dir, stamp));
  await writeFile(path.join(dir, stamp, "tls.crt"), pair.certPem);
  await writeFile(path.join(dir, stamp, "tls.key"), pair.keyPem);
  await symlink(stamp, path.join(dir, "..data_tmp"));
  await rename(path.join(dir, "..data_tmp"), path.join(dir, "..data"));
  for (const key of ["tls.crt", "tls.key"])
    await symlink(path.join("..data", key), path.join(dir, key)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "EEXIST") throw e;
    });
}

/** Whether a new connection trusting `ca` alone is served (the healthz answer), or its error. */
function reach(port: number, ca: string): Promise<string> {
  return new Promise((resolve) => {
    https
      .get({ host: "127.0.0.1", port, path: "/healthz", ca, agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(String(res.statusCode)));
      })
      .on("error", (err) => resolve(err.message));
  });
}

describe("the API server over https on certificate files that change", () => {
  let dir: string;
  let server: Server;
  let files: TlsFiles;
  const logs: LogEntry[] = [];
  const reads: Array<"ok" | "refused"> = [];
  const nextRead = (after: number) =>
    eventually(`read ${after + 1} of the TLS files`, () => (reads.length > after ? reads[after] : undefined));

  afterEach(async () => {
    files.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  it("serves a renewed certificate to the next connection, and keeps it through a bad pair", async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "jr2-tls-files-"));
    const first = servingCertificate(names);
    const second = servingCertificate(names);
    await kubeletWrite(dir, first, 1);
    const certFile = path.join(dir, "tls.crt");
    const keyFile = path.join(dir, "tls.key");
    const initial = { cert: first.certPem, key: first.keyPem };
    server = await startOrchestratorServer(
      { workspaces: {} as Workspaces, checkToken: () => undefined, metrics: () => "", tls: initial },
      0,
      "127.0.0.1",
    );
    const port = (server.address() as AddressInfo).port;
    files = new TlsFiles({
      certFile,
      keyFile,
      initial,
      serve: (pair) => (server as unknown as https.Server).setSecureContext(pair),
      log: (e) => logs.push(e),
      onRead: (o) => reads.push(o),
      pollMs: 20,
    });
    expect(await reach(port, first.caPem)).toBe("200");
    expect(await reach(port, second.caPem)).toMatch(/certificate/);

    await kubeletWrite(dir, second, 2);
    expect(await nextRead(0)).toBe("ok");
    expect(await reach(port, second.caPem)).toBe("200");
    expect(await reach(port, first.caPem)).toMatch(/certificate/);

    // A certificate with another's key: refused, the second still served, said once.
    const third = servingCertificate(names);
    await kubeletWrite(dir, { ...third, keyPem: first.keyPem }, 3);
    expect(await nextRead(1)).toBe("refused");
    expect(await reach(port, second.caPem)).toBe("200");
    await files.poll();
    expect(reads).toEqual(["ok", "refused"]);
    const errors = logs.filter((e) => e.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toMatch(/the key is not the certificate's. The pair served before is still served/);
    expect(JSON.stringify(logs)).not.toContain(first.keyPem.split("\n")[1]);
  });
});
