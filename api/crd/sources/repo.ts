// The Repo: one repository by url, cached bare on every node that needs it (decision 0010).
// One source of truth, as for the Sandbox.
import { z } from "zod";
import { SecretName, goDuration } from "./common";

export const REPO_NODE_PHASES = ["Cloning", "Present", "Failed"] as const;

/** Why a node's cache agent did not fetch a Repo (decision 0066); absent for git's own failures. */
export const REPO_NODE_REASON = {
  /** The Repo's namespace is not one the installation opted in to hold Sandboxes. */
  NamespaceNotEnabled: "NamespaceNotEnabled",
  /** spec.url is a local path or file:// url. */
  LocalUrl: "LocalUrl",
  /** spec.url's host resolves to an internal address the installation does not vouch for. */
  InternalAddress: "InternalAddress",
  /** The namespace has more Repos than one namespace may cache on a node. */
  RepoCountBound: "RepoCountBound",
  /** The namespace's caches on the node take the most bytes they may. */
  ByteBound: "ByteBound",
} as const;

export const RepoSpec = z
  .strictObject({
    url: z.string().min(1).meta({
      description:
        "The repository's network url: https, http, ssh (git@host:path or ssh://) or git://. A local path or file:// url is refused (decision 0066).",
    }),
    secretRef: z
      .strictObject({
        name: SecretName.meta({ description: "The Secret's name." }),
      })
      .optional()
      .meta({
        description: "A Secret in the Repo's namespace with fetch credentials: an https token or an ssh key.",
      }),
    interval: goDuration("spec.interval")
      .default("5m")
      .meta({ description: "How often each node's cache agent fetches. A Go duration." }),
    bound: z.boolean().optional().meta({
      description: "True when a Machine's slot binds this Repo: its caches are kept even with no pod mounting them.",
    }),
  })
  .meta({ description: "Which repository, and how to fetch it." });

export const RepoNode = z
  .strictObject({
    phase: z.enum(REPO_NODE_PHASES).meta({ description: "Cloning, Present or Failed." }),
    fetchedAt: z
      .string()
      .optional()
      .meta({ format: "date-time", description: "When the node's last successful fetch ended (RFC 3339)." }),
    error: z.string().optional().meta({
      description: "git's own words for the last failure on this node, or why it was not fetched, with the fix.",
    }),
    reason: z.enum(REPO_NODE_REASON).optional().meta({
      description:
        "Why this node did not fetch the Repo: NamespaceNotEnabled, LocalUrl, InternalAddress, RepoCountBound or ByteBound (the bound met; error gives its figure and the fix). Absent for git's own failures.",
    }),
  })
  .meta({ description: "The state of one node's cache of this Repo, written by that node's cache agent alone." });

export const RepoStatus = z
  .strictObject({
    identity: z.string().optional().meta({ description: "Host plus path: every spelling of the url lands here." }),
    key: z.string().optional().meta({ description: "The stable cache key derived from the identity." }),
    error: z.string().optional().meta({
      description:
        "Why spec.url is refused (a '..' segment, a password, ...) and the fix; no cache is kept for it. Absent when the url is fine.",
    }),
    present: z.number().int().optional().meta({
      format: "int32",
      description: "How many nodes hold a present cache (kept by the operator from status.nodes).",
    }),
    nodes: z
      .record(z.string(), RepoNode)
      .optional()
      .meta({ description: "Per node name, the state of that node's cache." }),
  })
  .meta({ description: "The Repo's identity and its caches, node by node." });

export const Repo = z
  .strictObject({
    apiVersion: z.string().optional(),
    kind: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    spec: RepoSpec,
    status: RepoStatus.optional(),
  })
  .meta({ description: "A Repo: one repository by url, kept as one bare cache per node by the cache agents." });

export type RepoSpec = z.infer<typeof RepoSpec>;
export type RepoSpecInput = z.input<typeof RepoSpec>;
export type RepoStatus = z.infer<typeof RepoStatus>;
export type RepoNode = z.infer<typeof RepoNode>;
