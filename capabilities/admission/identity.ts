// The operator's own identity, as the API server sees it (a SelfSubjectReview), so the pod guard
// can tell the operator's pod creates from anyone else's. Asked once; retried after a failure.
import { kubeRequest } from "../../lib/kube";

let asked: Promise<string> | undefined;

export function operatorIdentity(): Promise<string> {
  asked ??= kubeRequest<{ status?: { userInfo?: { username?: string } } }>(
    "POST",
    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  ).then((r) => {
    const name = r.status?.userInfo?.username;
    if (!name) throw new Error("the API server did not say who this operator is");
    return name;
  });
  asked.catch(() => (asked = undefined));
  return asked;
}
