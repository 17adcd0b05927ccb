# The default Sandbox image: Debian with bash, coreutils, git and the CA bundle, the Node runtime and
# the Harness at /opt/jr2, started by tini (it reaps what the Agent's commands leave behind). The
# Sandbox pod states no command for its Harness container: this entrypoint is what runs. The Harness
# listens on PORT, 8080 when unset (harness/main.ts); nothing here sets it, so the Agent's commands
# never inherit it. /work and /conversations are the pod's volumes; the image owns their mount points
# to the run user so it also runs without them.
#
# `npm run images` builds this image with no engine (scripts/images/, decision 0041) on the base the
# three images share; test/unit/images-dockerfiles.test.ts holds this file to it. After `npm run build`:
#   docker build -f scripts/images/sandbox.Dockerfile -t jr2/sandbox:0.1.0 .
FROM node:24-trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends acl ca-certificates git libstdc++6 openssh-client tini \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
    /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
 && groupadd -g 65532 jr2 && useradd -u 65532 -g 65532 -d /home/jr2 -m -s /bin/bash jr2 \
 && mkdir -p /work /conversations && chown 65532:65532 /work /conversations
COPY dist/companions/harness*js /opt/jr2/
WORKDIR /work
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/node", "/opt/jr2/harness.js"]
