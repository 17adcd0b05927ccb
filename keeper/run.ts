// The keeper's settings from its environment, and its API calls over the pooled client (lib/kube.ts).
import { ApiError } from "../lib/api-error";
import { kubeRequest } from "../lib/kube";
import type { Api, KeeperConfig } from "./keeper";

export const KEEPER_ENV = {
  module: "JR2_KEEPER_MODULE",
  namespace: "JR2_KEEPER_NAMESPACE",
  certificate: "JR2_KEEPER_CERTIFICATE",
  orchestratorNamespace: "JR2_KEEPER_ORCHESTRATOR_NAMESPACE",
  signingSecret: "JR2_KEEPER_SIGNING_SECRET",
  existingSecret: "JR2_KEEPER_EXISTING_SECRET",
} as const;

/** The keeper's settings; throws naming the variable and the fix. */
export function keeperConfigFrom(env: NodeJS.ProcessEnv): KeeperConfig {
  const need = (name: string) => {
    const v = env[name];
    if (!v) throw new Error(`${name} is not set: the chart's keeper Job sets it (decision 0075)`);
    return v;
  };
  const certificate = env[KEEPER_ENV.certificate] || "cluster";
  if (certificate !== "cluster" && certificate !== "certManager")
    throw new Error(`${KEEPER_ENV.certificate} is ${certificate}: it must be cluster or certManager`);
  return {
    module: need(KEEPER_ENV.module),
    namespace: env[KEEPER_ENV.namespace] || "pepr-system",
    certificate,
    orchestrator: {
      namespace: env[KEEPER_ENV.orchestratorNamespace] || "jr2-system",
      secret: need(KEEPER_ENV.signingSecret),
      existing: env[KEEPER_ENV.existingSecret] === "true",
    },
  };
}

/** The keeper's API calls, each write under its own field manager, so a Helm upgrade (three-way
 * merge or server-side apply) leaves the fields it writes alone. */
export function kubeApi(fieldManager: string): Api {
  const q = `?fieldManager=${encodeURIComponent(fieldManager)}`;
  return {
    async get<T>(path: string) {
      try {
        return await kubeRequest<T>("GET", path);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return undefined;
        throw err;
      }
    },
    async create(path, body) {
      await kubeRequest("POST", path + q, body);
    },
    async patch(path, body, type) {
      await kubeRequest(
        "PATCH",
        path + q,
        body,
        type === "json" ? "application/json-patch+json" : "application/merge-patch+json",
      );
    },
  };
}
