// Decision 0025's five texts for a pick that got no receipt, written out here word for word from
// the decision, not from harness/picks/texts.ts: the tests that hold the module to the decision
// (pick-texts.test.ts, the table; pick-faults.test.ts, real faults) read them from this one copy.
export const ADR = {
  neverReached: (detail: string) => `the pick never reached the Orchestrator (${detail}) — try it again`,
  unknownAfterAbort: (pick: string, detail: string) =>
    `It is not known whether this pick reached the workflow: your turn ended while the call to \`${pick}\` waited for the workflow's answer (${detail}). A pick that the workflow takes can end the turn in this way. Do not call \`${pick}\` again before you read the next message: it tells you where the workflow is now.`,
  unknown: (pick: string, detail: string) =>
    `It is not known whether this pick reached the workflow: the call to \`${pick}\` failed before the workflow answered (${detail}). A second call to \`${pick}\` can run the pick twice.`,
  reachedUnreadAfterAbort: (pick: string) =>
    `This pick reached the workflow, and your turn ended before you read its answer. Do not call \`${pick}\` again before you read the next message: it tells you where the workflow is now.`,
  reachedUnread: (pick: string, detail: string) =>
    `This pick reached the workflow, and its answer did not reach you (${detail}). Do not call \`${pick}\` again before you read the next message: it tells you where the workflow is now.`,
};
