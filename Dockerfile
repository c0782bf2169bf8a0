# Multi-stage: build a release binary, run it on a slim Debian with bash as a non-root user.
FROM rust:1-bookworm AS build
WORKDIR /src
# The whole tree (less .dockerignore): Cargo.toml may name bench and test targets.
COPY . .
RUN cargo build --release --locked --bin harness

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
