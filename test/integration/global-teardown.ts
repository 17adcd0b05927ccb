// Stops the operator (removing its webhooks) and the control endpoint. The cluster stays up for
// the next run; `npm run cluster -- down` stops it (.ci/run does).
type Held = { operator?: { stop(): Promise<void> }; control?: { close(): void } };

export default async function globalTeardown() {
  const held = (globalThis as typeof globalThis & { __jr2?: Held }).__jr2;
  held?.control?.close();
  await held?.operator?.stop();
}
