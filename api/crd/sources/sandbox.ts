// The Sandbox: one pod's infrastructure (decision 0013). The field set is jr2's wire contract,
// the spec jr2's Orchestrator writes (`crFor`) and the status it reads (decision 0001), so a jr2 Orchestrator's CRs
// work unchanged (docs/decisions/0001-wire-contract.md). This file is the one source of truth:
// the TypeScript types are inferred from it and the CRD YAML is generated from it.
import { z } from "zod";
import * as core from "../generated/corev1";
import { Condition, SecretName, goDuration, goDurationMs } from "./common";
import { DEFAULT_IDLE_TIMEOUT } from "../../wire";
import { EGRESS_LIST_MAX, EGRESS_RULE_MAX_LENGTH } from "../../egress-point";

export const SANDBOX_PHASES = ["Pending", "Ready", "Lost", "Terminating"] as const;

// The range of spec.idleTimeout, one statement read by every side: admission refuses a Sandbox
// outside it (its floor lowered only by JR2_MIN_IDLE_TIMEOUT, for the lease's own tests), the
// Orchestrator's API refuses a workspace outside it, the operator's lease never counts past the
// ceiling, and the CRD's description says it (a Go duration's range is no OpenAPI pattern).
export const IDLE_TIMEOUT_MIN = "1m";
export const IDLE_TIMEOUT_MAX = "168h";
export const IDLE_TIMEOUT_MIN_MS = 60_000;
export const IDLE_TIMEOUT_MAX_MS = 168 * 3_600_000;
/** The range in words, for descriptions and refusals. */
export const IDLE_TIMEOUT_RANGE = `between ${IDLE_TIMEOUT_MIN} and ${IDLE_TIMEOUT_MAX} (7 days)`;

/** Whether a Go duration lies within the idle-timeout range; false for text that is none. */
export function idleTimeoutInRange(text: string): boolean {
  const ms = goDurationMs(text);
  return ms !== undefined && ms >= IDLE_TIMEOUT_MIN_MS && ms <= IDLE_TIMEOUT_MAX_MS;
}

/** An idle timeout as a client may ask for one: a Go duration within the range. `what` names the
 * field in the refusals. Text that is no Go duration gets only the format's refusal. */
export const idleTimeoutField = (what: string) =>
  goDuration(what).refine((text) => goDurationMs(text) === undefined || idleTimeoutInRange(text), {
    message:
      `${what} must be ${IDLE_TIMEOUT_RANGE} (shorter leaves no time to renew, longer keeps an abandoned ` +
      `Sandbox over a week): write one within it, such as "${DEFAULT_IDLE_TIMEOUT}"`,
  });

/** A Repo by cache key: where the node's cache lands (`repo-<key>` volume, `/repos/<key>`). */
export const SandboxRepo = z
  .strictObject({
    key: z
      .string()
      .min(1)
      .max(58)
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: "must be a DNS label (lower-case letters, digits, '-')" })
      .meta({ description: "The Repo key (the Repo's status.key): names the repo-<key> volume and /repos/<key>." }),
    url: z.string().min(1).meta({ description: "The repository's url, as the Repo resource names it." }),
  })
  .meta({ description: "One Repo this Sandbox reads from its node's cache, read-only at /repos/<key>." });

export const GitCredential = z
  .strictObject({
    name: SecretName.meta({
      description: "The name of a Secret in the Sandbox's namespace holding a git push credential.",
    }),
  })
  .meta({
    description: "A push credential, projected into the effector sidecar alone at /run/jr2/secrets/@git/<name>/.",
  });

/** The hosts this Sandbox may reach through the egress point beside the installation's base list
 * (decision 0051). The one field of the spec a live Sandbox takes without its pod: the egress point
 * reads it at each change. */
export const SandboxEgress = z
  .strictObject({
    allow: z
      .array(z.string().min(1).max(EGRESS_RULE_MAX_LENGTH))
      .max(EGRESS_LIST_MAX)
      .optional()
      .meta({
        description:
          "Hosts the pod may reach through the egress point, beside the installation's base list and its Repos' " +
          "remotes: `host`, `host:port`, `*.suffix` (any deeper name, never the suffix itself), `*.suffix:port`, " +
          "an IP literal (`[v6]` with a port). No port: any port. Admission refuses an entry that is none of these.",
      }),
  })
  .meta({
    description:
      "Egress by allowlist (decision 0051): every connection out of the pod goes through the egress point, " +
      "which admits it by name. A change takes effect at once, with no restart.",
  });

export const SandboxSpec = z
  .strictObject({
    image: z.string().min(1).meta({ description: "The Harness image: the primary container, named harness." }),
    command: z
      .array(z.string())
      .optional()
      .meta({ description: "The Harness container's entrypoint (the image's when absent)." }),
    args: z.array(z.string()).optional().meta({ description: "Arguments to the Harness container's entrypoint." }),
    env: z.array(core.EnvVar).optional().meta({ description: "Environment variables of the Harness container." }),
    envFrom: z
      .array(core.EnvFromSource)
      .optional()
      .meta({ description: "Sources of environment variables of the Harness container." }),
    securityContext: core.SecurityContext.optional().meta({
      description:
        "The Harness container's security context. When absent the operator applies the hardened default " +
        "(runAsNonRoot, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault).",
    }),
    resources: core.ResourceRequirements.optional().meta({ description: "The Harness container's resources." }),
    readinessProbe: core.Probe.optional().meta({
      description: "The Harness container's readiness probe; when absent, GET /healthz on port 8080.",
    }),
    podResources: core.ResourceRequirements.optional().meta({
      description: "Pod-level resources (KEP-2837): the ceiling for the whole pod.",
    }),
    shmSize: core.quantity.optional().meta({
      description: "Size limit of the memory-backed /dev/shm mounted in the Harness container.",
    }),
    fsGroup: z.number().int().min(0).optional().meta({
      format: "int64",
      description: "The pod's fsGroup, the work group shared by every container (default 2000).",
    }),
    idleTimeout: goDuration("spec.idleTimeout")
      .default(DEFAULT_IDLE_TIMEOUT)
      .meta({
        description:
          "How long the Sandbox may go without a keepalive (the jr2.dev/keepalive annotation) before the " +
          "operator deletes it, counted from max(creation, last keepalive; a keepalive in the future counts " +
          `as now). A Go duration ${IDLE_TIMEOUT_RANGE}, which admission enforces.`,
      }),
    nodeSelector: z
      .record(z.string(), z.string())
      .optional()
      .meta({ description: "The pod's nodeSelector, verbatim." }),
    tolerations: z.array(core.Toleration).optional().meta({ description: "The pod's tolerations, verbatim." }),
    priorityClassName: z.string().optional().meta({ description: "The pod's priorityClassName." }),
    runtimeClassName: z.string().optional().meta({ description: "The pod's runtimeClassName." }),
    hostAliases: z
      .array(core.HostAlias)
      .optional()
      .meta({
        description:
          "The pod's /etc/hosts entries, verbatim: how a Sandbox pod, which reaches no DNS resolver, finds the " +
          "egress point and the Orchestrator by name (decision 0051).",
      }),
    egress: SandboxEgress.optional(),
    initContainers: z.array(core.Container).optional().meta({ description: "Init containers, verbatim and in order." }),
    sidecars: z
      .array(core.Container)
      .optional()
      .meta({
        description:
          "Further containers scheduled beside the Harness without the operator understanding them " +
          "(the custodian, the user container, the effector).",
      }),
    repos: z.array(SandboxRepo).optional().meta({ description: "The Repos whose node caches this Sandbox mounts." }),
    gitCredentials: z
      .array(GitCredential)
      .optional()
      .meta({ description: "Push credentials by Secret name, projected into the effector sidecar alone." }),
    volumes: z.array(core.Volume).optional().meta({ description: "Pod volumes, verbatim." }),
    volumeMounts: z.array(core.VolumeMount).optional().meta({ description: "Volume mounts of the Harness container." }),
  })
  .meta({ description: "What the Sandbox's one pod runs. Immutable once created." });

export const LastTerminated = z
  .strictObject({
    reason: z.string().optional().meta({ description: "Why the container last ended (e.g. OOMKilled, Error)." }),
    exitCode: z.number().int().optional().meta({ format: "int32", description: "Its exit code." }),
    message: z.string().optional().meta({ description: "Its termination message." }),
    finishedAt: z.string().optional().meta({ format: "date-time", description: "When it ended (RFC 3339)." }),
  })
  .meta({ description: "How the container last ended." });

export const ContainerReport = z
  .strictObject({
    restartCount: z.number().int().meta({ format: "int32", description: "How many times the container restarted." }),
    lastTerminated: LastTerminated.optional(),
  })
  .meta({ description: "A container's restarts and last end, published so clients never read the pod." });

export const ContainerWaiting = z
  .strictObject({
    container: z.string().meta({ description: "The container's name." }),
    reason: z.string().meta({ description: "Why it waits (e.g. ImagePullBackOff, CreateContainerConfigError)." }),
    message: z.string().optional().meta({ description: "The kubelet's words." }),
  })
  .meta({ description: "A container still waiting for a reason other than a routine one." });

export const SandboxStatus = z
  .strictObject({
    phase: z
      .enum(SANDBOX_PHASES)
      .optional()
      .meta({
        description:
          "Pending until the pod is Ready; Ready only when it is; Lost (terminal) once the pod is gone or " +
          "ended; Terminating while the Sandbox is deleted.",
      }),
    endpoint: z.string().optional().meta({
      description: "http://<name>.<namespace>.svc:8080 once the Service exists. Gate on phase Ready, not on this.",
    }),
    podName: z.string().optional().meta({ description: "The Sandbox's pod." }),
    podUID: z.string().optional().meta({ description: "The pod's uid." }),
    nodeName: z.string().optional().meta({ description: "The node the pod runs on." }),
    observedGeneration: z
      .number()
      .int()
      .optional()
      .meta({ format: "int64", description: "The .metadata.generation this status was computed for." }),
    conditions: z.array(Condition).optional().meta({ description: "Scheduled, Ready, ReposFresh and Lost." }),
    harness: ContainerReport.optional().meta({ description: "The harness container's restarts and last end." }),
    effector: ContainerReport.optional().meta({ description: "The effector sidecar's restarts and last end." }),
    waiting: z
      .array(ContainerWaiting)
      .optional()
      .meta({ description: "Containers waiting for a reason other than a routine one, init containers first." }),
  })
  .meta({ description: "What a client needs to know about the Sandbox's pod; clients never read the pod." });

export const Sandbox = z
  .strictObject({
    apiVersion: z.string().optional(),
    kind: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    spec: SandboxSpec,
    status: SandboxStatus.optional(),
  })
  .meta({
    description:
      "A Sandbox: one hardened pod and one Service running an agent's Harness, with opaque sidecars, Repo " +
      "caches and push credentials. It becomes exactly one pod, never a second: a pod that is gone or ended " +
      "makes it Lost.",
  });

export type SandboxSpec = z.infer<typeof SandboxSpec>;
/** What a client writes: defaulted fields (idleTimeout) may be left out. */
export type SandboxSpecInput = z.input<typeof SandboxSpec>;
export type SandboxStatus = z.infer<typeof SandboxStatus>;
export type SandboxPhase = (typeof SANDBOX_PHASES)[number];
export type ContainerReport = z.infer<typeof ContainerReport>;
export type ContainerWaiting = z.infer<typeof ContainerWaiting>;
