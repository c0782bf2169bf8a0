# Multi-stage: build a release binary, run it on a slim Debian with bash as a non-root user.
FROM rust:1-bookworm AS build
WORKDIR /src
# The whole tree (less .dockerignore): Cargo.toml may name bench and test targets.
COPY . .
# CARGO_OFFLINE=1 builds from ./vendor (`cargo vendor` run beside the Dockerfile, as
# scripts/docker-test.sh does) with no network; the default fetches the crates from crates.io.
ARG CARGO_OFFLINE=0
RUN if [ "$CARGO_OFFLINE" = 1 ]; then \
      set -- --offline --config 'source.crates-io.replace-with="vendored"' \
             --config 'source.vendored.directory="vendor"'; \
    fi \
 && cargo build "$@" --release --locked -p harness --bin harness

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash ca-certificates coreutils git \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 harness
COPY --from=build /src/target/release/harness /usr/local/bin/harness
USER harness
WORKDIR /work
ENTRYPOINT ["harness"]
CMD ["help"]
