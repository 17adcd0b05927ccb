// Which local addresses listen on a TCP port, read from the kernel's socket tables
// (/proc/net/tcp and tcp6), so a test can tell a loopback server from one open to the network.
import { readFileSync } from "node:fs";

const LISTEN = "0A";

/** "0100007F" -> "127.0.0.1"; a tcp6 address as eight groups ("::1" is 0:0:0:0:0:0:0:1). */
function addressOf(hex: string): string {
  if (hex.length === 8) return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join(".");
  const words = [0, 1, 2, 3].map((w) => hex.slice(w * 8, w * 8 + 8));
  // Each 32-bit word is stored in host (little-endian) order.
  const bytes = words.flatMap((w) => [3, 2, 1, 0].map((i) => w.slice(i * 2, i * 2 + 2)));
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(parseInt(bytes[i] + bytes[i + 1], 16).toString(16));
  return groups.join(":");
}

/** Every address listening on `port` (IPv4 dotted, IPv6 as eight groups). */
export function listeners(port: number): string[] {
  const found: string[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.trim().split("\n").slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      const [addr, portHex] = local.split(":");
      if (state === LISTEN && parseInt(portHex, 16) === port) found.push(addressOf(addr));
    }
  }
  return found;
}

/** Loopback: 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address. */
export const isLoopback = (address: string) =>
  /^127\./.test(address) || address === "0:0:0:0:0:0:0:1" || /^0:0:0:0:0:ffff:7f/.test(address);
