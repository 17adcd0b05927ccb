// A LabelSelector (a NetworkPolicy's podSelector or namespaceSelector) as the `-l` / labelSelector
// string the API server takes, so a test asks the API server itself which objects a written policy
// selects (decision 0067) instead of judging the selector's meaning in the test.
type Requirement = { key: string; operator: string; values?: string[] };
export type LabelSelector = { matchLabels?: Record<string, string>; matchExpressions?: Requirement[] };

export function selectorString(s: LabelSelector): string {
  const parts = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of s.matchExpressions ?? []) {
    const values = `(${(e.values ?? []).join(",")})`;
    if (e.operator === "Exists") parts.push(e.key);
    else if (e.operator === "DoesNotExist") parts.push(`!${e.key}`);
    else if (e.operator === "In") parts.push(`${e.key} in ${values}`);
    else if (e.operator === "NotIn") parts.push(`${e.key} notin ${values}`);
    else throw new Error(`selector operator ${e.operator} is not one a LabelSelector takes`);
  }
  return parts.join(",");
}
