# The companions image: the cache agent, the Custodian, the Harness, the Orchestrator and the egress
# point as the one-file bundles `npm run build` writes to dist/companions/, on Node 24 with git (and ssh and ACL
# tools, which the cache agent and the Harness call). Each manifest picks its program with
# `command: ["node", "/app/<name>.js"]`. It also carries the scripted model provider
# (/app/scripted-model.js) for demos and tests that serve it from a pod.
#
# `npm run images` builds this image with no engine (scripts/images/, decision 0041) on the base the
# three images share; this file states the same image for those with an engine, and
# test/unit/images-dockerfiles.test.ts holds the two to the same packages, user, paths and command.
# It also carries jr2-confine (/app/jr2-confine, effector/confine/, decision 0070), the static program
# the Sandbox Effector runs a command through to confine it with Landlock: built in the first stage
# as scripts/confine-binary.sh builds it (its own layer in the built image).
# Build after `npm run build`:
#   docker build -t jr2/companions:0.1.0 .
FROM golang:1.26-trixie AS confine
WORKDIR /src
COPY effector/confine/ ./
RUN CGO_ENABLED=0 GOWORK=off go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o /jr2-confine .

FROM node:24-trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends acl ca-certificates git libstdc++6 openssh-client tini \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
    /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
 && groupadd -g 65532 jr2 && useradd -u 65532 -g 65532 -d /home/jr2 -m -s /bin/bash jr2
COPY --from=confine /jr2-confine /app/jr2-confine
COPY dist/companions/*js /app/
WORKDIR /app
USER 65532:65532
ENTRYPOINT []
CMD ["node"]
