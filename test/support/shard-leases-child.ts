// One replica's lease loop in a process of its own (test/integration/shard-leases.test.ts): the
// test kills or freezes it as a crash or a stall would. Prints each change of its shards, and its
// log, as JSON lines on stdout; SIGTERM hands its shards over and exits.
import { ShardLeases } from "../../orchestrator/replicas/shard-leases";

const out = (entry: Record<string, unknown>) =>
  process.stdout.write(JSON.stringify({ at: Date.now(), ...entry }) + "\n");

const [namespace, identity, timing] = [process.env.NS, process.env.IDENTITY, process.env.TIMING];
if (!namespace || !identity || !timing) {
  process.stderr.write("shard-leases-child: set NS (the Leases' namespace), IDENTITY and TIMING (JSON)\n");
  process.exit(2);
}
const leases = new ShardLeases({
  namespace,
  identity,
  peerUrl: `https://${identity}.test:8090`,
  timing: JSON.parse(timing),
  log: (entry) => out({ event: "log", ...entry }),
});
leases.onChange((change) => {
  out({ event: "change", ...change });
});
process.on("SIGTERM", () => {
  void leases.stop().then(() => process.exit(0));
});
leases.start().then(
  () => out({ event: "joined" }),
  (err: unknown) => {
    out({ event: "failed", detail: String(err) });
    process.exit(1);
  },
);
