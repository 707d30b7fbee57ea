# syntax=docker/dockerfile:1
# svcbot and svc-venue in one image. Build: docker build -t svcbot:local .
# The build stage compiles TypeScript and better-sqlite3's native module; the
# runtime stage holds only production dependencies and the compiled output.
# Both stages use the same base so the native module matches Node and glibc.

FROM node:24.11.1-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# `npm install`, not `npm ci`: ci trips over platform-specific optional packages the lockfile lacks.
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY apps ./apps
COPY src ./src
COPY strategies ./strategies
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

FROM node:24.11.1-bookworm-slim AS runtime
LABEL org.opencontainers.image.title="svcbot" \
      org.opencontainers.image.description="Algorithmic trading daemon for the SVC Spot Trading and Account API, with svc-venue"
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    SVC_DATABASE_PATH=/app/data/svcbot.db \
    SVC_HEALTH_PORT=8081
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
# Migrations are found next to the compiled store (dist/src/store -> dist/migrations).
COPY migrations ./dist/migrations
COPY config ./config
COPY ops/healthcheck.mjs ./ops/healthcheck.mjs
# Strategies of your own are mounted, not built in: `-v ./my-strategies:/strategies:ro` and
# "strategy": "/strategies/FILE.ts" in the config. A .ts plugin compiles at load through tsx,
# a production dependency kept by the prune above (docs/operations.md, "Strategies of your own").
# The only writable paths: the database and the promotion evidence live in volumes, the root
# filesystem can be read-only. Both exist here, owned by the unprivileged user, because a new named
# volume takes the owner and mode of the image's folder it is mounted on (a folder missing from the
# image becomes a root-owned volume the bot cannot write).
RUN mkdir -p /app/data /app/evidence && chown node:node /app/data /app/evidence && chmod 0700 /app/data /app/evidence
VOLUME ["/app/data", "/app/evidence"]
# The image's `node` user, by number so that orchestrators can verify it is not root.
USER 1000:1000
EXPOSE 8081
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "/app/ops/healthcheck.mjs"]
# SIGTERM starts the daemon's orderly shutdown, which cancels open orders first;
# give it time with `docker stop -t 30` or compose's stop_grace_period.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/svcbot.js"]
CMD ["run", "--config", "config/default.json", "--mode", "paper"]
