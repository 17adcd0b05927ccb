// A reference to a Sandbox as the owner of what is written for it: the garbage collector takes the
// owned object with the Sandbox, whoever deletes the Sandbox (decision 0021).
import { API_VERSION } from "./sources/common";
import { SANDBOX_KIND } from "./definitions";

/** `blockOwnerDeletion` is false outright: setting it true would need update rights on the
 * Sandbox's finalizers, which no writer of owned objects holds. */
export const sandboxOwnerReference = (name: string, uid: string) => ({
  apiVersion: API_VERSION,
  kind: SANDBOX_KIND.kind,
  name,
  uid,
  controller: true,
  blockOwnerDeletion: false,
});
