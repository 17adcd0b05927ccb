// A child process of a local run (the module's processes, a cache agent, the Orchestrator): whether
// it still runs, and stopping it as a signal and then its exit, however often stop is called.
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";

/** Neither exited nor ended by a signal. */
export const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

/** Made at spawn (an exit seen later would never settle): signals the child if it still runs, and
 * settles once it has exited. */
export function stopper(child: ChildProcess): (signal?: NodeJS.Signals) => Promise<void> {
  const exited = once(child, "exit").then(() => undefined);
  return (signal = "SIGTERM") => {
    if (running(child)) child.kill(signal);
    return exited;
  };
}
