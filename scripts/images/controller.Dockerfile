# The module's controller image: what `npm run build`'s manifests and Helm chart name (pepr build
# --custom-image, package.json), in place of Pepr's upstream image, which cannot be pulled here. Pepr's
# Deployments pass `/app/node_modules/pepr/dist/controller.js <hash>` as args to node; the controller
# reads the module from its Secret at /app/load, writes it to /app and forks it, so /app belongs to
# the run user while the packages stay root's, under /opt: deployed, /app is an emptyDir over a
# read-only root (decision 0047), and /app/node_modules a link for a Deployment that does not.
#
# `npm run images` builds this image with no engine (scripts/images/, decision 0041) and stages its
# packages, the ones the controller and the module load, at package-lock.json's versions, in
# dist/controller/node_modules; test/unit/images-dockerfiles.test.ts holds this file to it. After
# `npm run images`:
#   docker build -f scripts/images/controller.Dockerfile -t jr2/controller:0.1.0 .
FROM node:24-trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends acl ca-certificates git libstdc++6 openssh-client tini \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
    /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
 && groupadd -g 65532 jr2 && useradd -u 65532 -g 65532 -d /home/jr2 -m -s /bin/bash jr2 \
 && mkdir -p /app && chown 65532:65532 /app && ln -s /opt/jr2-controller/node_modules /app/node_modules
COPY dist/controller/node_modules/ /opt/jr2-controller/node_modules/
WORKDIR /app
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/node"]
