// Injected first into every companion's bundle by scripts/companion-bundle.ts, before any Buffer
// exists. Node 24's V8 (13.6) raised its new space cap from 8 to 32 MB, and with it the young
// Buffers' bytes that start a scavenge from 32 to 128 MB: a companion passing a long answer through
// kept its spent chunks until a full GC. The cap Node 20 and 22 had settles the Custodian about 35
// MiB lower and moves such an answer 1.5 times as fast (docs/decisions/0052-node-24-runtime.md).
// V8 reads it at each Buffer's allocation, so setting it here works; NODE_OPTIONS refuses the flag.
import { setFlagsFromString } from "node:v8";

setFlagsFromString("--scavenger-max-new-space-capacity-mb=8");
