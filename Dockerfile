# The companions image: the cache agent, the Harness and the Orchestrator as the one-file bundles
# `npm run build` writes to dist/companions/, on Node 20 with git (and ssh and ACL tools, which
# the cache agent and the Harness call). Build after `npm run build`:
#   docker build -t jr2/companions:0.1.0 .
# Each manifest picks its program with `command: ["node", "/app/<name>.js"]`.
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client acl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY dist/companions/ /app/
USER 65532:65532
