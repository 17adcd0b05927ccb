// How the Effector's own connections leave the pod (decision 0051): through the egress point the
// pod's HTTPS_PROXY names (an HTTP CONNECT proxy), except the hosts NO_PROXY names; and whom they
// trust: the system roots plus the installation's bundle (JR2_EFFECTOR_CA_FILE). Pure but for
// reading that bundle.
import { BlockList, isIP } from "node:net";
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";

export type Egress = {
  /** The proxy a connection to `url` goes through, or undefined to go direct. */
  proxyFor(url: URL): string | undefined;
  /** The raw settings, to hand on to git and to `connect`. */
  env: Record<string, string>;
};

const first = (env: NodeJS.ProcessEnv, ...names: string[]) => names.map((n) => env[n]).find((v) => v);

/** NO_PROXY as curl reads it: `*`, host names (a leading `.` or not: the host and its subdomains),
 * `host:port`, IP addresses and IPv4/IPv6 CIDR ranges. */
export function noProxyMatcher(list: string | undefined): (host: string, port: string) => boolean {
  const entries = (list ?? "")
    .split(",")
    .map((e) => e.trim().toLowerCase())
    .filter(Boolean);
  if (entries.includes("*")) return () => true;
  const ranges = new BlockList();
  const names: Array<{ name: string; port?: string }> = [];
  for (const e of entries) {
    const cidr = /^(.+)\/(\d{1,3})$/.exec(e);
    const family = cidr ? isIP(cidr[1]) : 0;
    if (cidr && family) {
      ranges.addSubnet(cidr[1], Number(cidr[2]), family === 6 ? "ipv6" : "ipv4");
      continue;
    }
    const hp = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(e);
    const name = (hp ? hp[1] : e).replace(/^\[|\]$/g, "").replace(/^\*?\./, "");
    names.push({ name, port: hp?.[2] });
  }
  return (rawHost, port) => {
    const host = rawHost.toLowerCase().replace(/^\[|\]$/g, "");
    const family = isIP(host);
    if (family && ranges.check(host, family === 6 ? "ipv6" : "ipv4")) return true;
    return names.some((n) => (!n.port || n.port === port) && (host === n.name || host.endsWith(`.${n.name}`)));
  };
}

export function egressFrom(env: NodeJS.ProcessEnv): Egress {
  const https = first(env, "HTTPS_PROXY", "https_proxy");
  const http = first(env, "HTTP_PROXY", "http_proxy") ?? https;
  const noProxy = first(env, "NO_PROXY", "no_proxy");
  const skip = noProxyMatcher(noProxy);
  const out: Record<string, string> = {};
  if (https) out.HTTPS_PROXY = out.https_proxy = https;
  if (http) out.HTTP_PROXY = out.http_proxy = http;
  if (noProxy) out.NO_PROXY = out.no_proxy = noProxy;
  return {
    env: out,
    proxyFor(url) {
      const proxy = url.protocol === "http:" ? http : https;
      if (!proxy) return undefined;
      const port = url.port || (url.protocol === "http:" ? "80" : url.protocol === "ssh:" ? "22" : "443");
      return skip(url.hostname, port) ? undefined : proxy;
    },
  };
}

/** The system roots and the installation's bundle, or the system roots alone; a bundle that cannot
 * be read throws, naming the variable. */
export function trustedRoots(caFile: string | undefined): string[] {
  if (!caFile) return [...rootCertificates];
  try {
    return [...rootCertificates, readFileSync(caFile, "utf8")];
  } catch (err) {
    throw new Error(
      `JR2_EFFECTOR_CA_FILE=${caFile} cannot be read (${(err as NodeJS.ErrnoException).code}): mount the trust bundle there or unset it`,
    );
  }
}
