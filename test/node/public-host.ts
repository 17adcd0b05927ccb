// The stand-in public host (docs/decisions/0051): listeners a test runs inside the real node's network
// namespace jr2-public, on its documentation-range addresses (dev/cluster/node.sh public_host_up),
// and what they recorded. Pods of the real node reach it through the node (no NAT, so a record's
// `from` is the pod's own address); the node's CoreDNS names it (allowed.egress.example,
// other.egress.example) and forwards the zone attacker.example to its DNS recorder. Needs root
// (`ip netns exec`), as the node tier runs. One per test file: start it in beforeAll, stop it in
// afterAll (two at once would fight over the same ports).
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";
import { ROOT, fromSetup, until } from "./support";

/** The stand-in's addresses and names, as `cluster.sh env` prints them (the tier's setup hands them over). */
export function publicHostAddresses() {
  return {
    netns: fromSetup("JR2_PUBLIC_NETNS"),
    /** allowed.egress.example: HTTP on :80 and :443; TCP echo on :22, where an ssh server would be. */
    allowedIp: fromSetup("JR2_PUBLIC_ALLOWED_IP"),
    allowedName: "allowed.egress.example",
    /** other.egress.example: HTTP on :80 and :443, TCP echo on :7, UDP recorder (echo) on :7. */
    otherIp: fromSetup("JR2_PUBLIC_OTHER_IP"),
    otherName: "other.egress.example",
    /** The DNS recorder, UDP and TCP :53, answering NXDOMAIN to everything. */
    dnsIp: fromSetup("JR2_PUBLIC_DNS_IP"),
    /** The zone the node's CoreDNS forwards to the DNS recorder. */
    dnsZone: fromSetup("JR2_PUBLIC_DNS_ZONE"),
  };
}

export type HttpRecord = {
  kind: "http";
  at: string;
  /** The listener, address:port. */
  local: string;
  /** The client's address (a pod's IP: nothing NATs on the way). */
  from: string;
  method: string;
  /** The Host header, or null. */
  host: string | null;
  path: string;
  /** The Authorization header as received, or null. */
  authorization: string | null;
};
export type TcpRecord = { kind: "tcp"; at: string; local: string; from: string };
export type UdpRecord = { kind: "udp"; at: string; local: string; from: string; data: string };
export type DnsRecord = { kind: "dns"; at: string; transport: "udp" | "tcp"; from: string; name: string; type: number };
/** A request to the stand-in forge (issue 56): git's smart HTTP or its pull-request route. */
export type ForgeRecord = {
  kind: "forge";
  at: string;
  local: string;
  from: string;
  method: string;
  path: string;
  /** git-upload-pack or git-receive-pack, for git's requests. */
  service: string | null;
  authorization: string | null;
  /** An API request's body (its first 4 KiB). */
  body: string | null;
  bytes: number;
};
export type PublicRecord = HttpRecord | TcpRecord | UdpRecord | DnsRecord | ForgeRecord;

/** The stand-in forge: HTTPS on `port` of the allowed address, its certificate and key (PEM), the
 * directory of its bare repositories, the token every request must carry, and how long a push to a
 * `held*` repository is held. */
export type ForgeOptions = { port: number; cert: string; key: string; root: string; token: string; holdMs?: number };

export type PublicHost = {
  /** Everything recorded so far, oldest first: what this process has read from the listeners' pipe,
   * which happens only while it awaits (not during a spawnSync). After a request, use waitFor. */
  records(): PublicRecord[];
  http(): HttpRecord[];
  tcp(): TcpRecord[];
  udp(): UdpRecord[];
  dns(): DnsRecord[];
  forge(): ForgeRecord[];
  /** Waits until `pick` returns a value for the records so far (polling, with a deadline). */
  waitFor<T>(what: string, pick: (records: PublicRecord[]) => T | undefined, ms?: number): Promise<T>;
  /** Stops the listeners; resolves once they are gone. */
  stop(): Promise<void>;
};

const SERVER = join(ROOT, "test", "support", "public-host-server.cjs");

/** Starts the listeners in the namespace; resolves once every one is bound. */
export async function startPublicHost(options: { forge?: ForgeOptions } = {}): Promise<PublicHost> {
  const a = publicHostAddresses();
  const config = {
    http: [a.allowedIp, a.otherIp].flatMap((h) => [
      [h, 80],
      [h, 443],
    ]),
    // :22 records every connection an ssh client opens (a test of ssh around the proxy is then
    // told by what arrived, not by the refusal of a port nothing listens on).
    tcpEcho: [
      [a.otherIp, 7],
      [a.allowedIp, 22],
    ],
    udp: [[a.otherIp, 7]],
    dns: [a.dnsIp, 53],
    ...(options.forge ? { forge: { host: a.allowedIp, ...options.forge } } : {}),
  };
  const child: ChildProcessByStdio<Writable, Readable, Readable> = spawn(
    "ip",
    ["netns", "exec", a.netns, process.execPath, SERVER, JSON.stringify(config)],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  const records: PublicRecord[] = [];
  let stderr = "";
  let ready = false;
  let exited: number | null | undefined;
  let rest = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      if (!line) continue;
      const r = JSON.parse(line);
      if (r.ready) ready = true;
      else records.push(r as PublicRecord);
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const gone = new Promise<void>((resolve) =>
    child.on("exit", (code) => {
      exited = code;
      resolve();
    }),
  );
  await until(`the stand-in public host's listeners in netns ${a.netns} bound`, 15_000, () => {
    if (exited !== undefined)
      throw new Error(`ip netns exec ${a.netns} ... public-host-server.cjs exited (${exited}): ${stderr.trim()}`);
    return ready ? true : undefined;
  }).catch(async (err) => {
    child.kill("SIGKILL");
    await gone;
    // The last error (the server's own words) is the useful part.
    throw new Error(`${err.message}${stderr ? `\n${stderr.trim()}` : ""}`);
  });
  const of = <K extends PublicRecord["kind"]>(kind: K) =>
    records.filter((r): r is Extract<PublicRecord, { kind: K }> => r.kind === kind);
  return {
    records: () => [...records],
    http: () => of("http"),
    tcp: () => of("tcp"),
    udp: () => of("udp"),
    dns: () => of("dns"),
    forge: () => of("forge"),
    waitFor: (what, pick, ms = 15_000) => until(what, ms, () => pick([...records])),
    stop: async () => {
      if (exited === undefined) {
        child.stdin.end();
        child.kill("SIGTERM");
      }
      await gone;
    },
  };
}
