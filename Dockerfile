# syntax=docker/dockerfile:1
# The muster controller image: `muster` built with the controller and both
# cloud providers (features aws, gcp), run as a non-root user on a distroless
# base (glibc, CA certificates, no shell).
#
#   docker build -t REGISTRY/muster:TAG .
#   docker push REGISTRY/muster:TAG
#
# --build-arg FEATURES=controller builds without the cloud SDKs (much faster;
# the simulated cloud of docs/quickstart-local.md is always built in).
#
# docs/install.md has the multi-architecture build and the chart values.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
# cargo features of the binary: the controller with both cloud providers
ARG FEATURES=aws,gcp
WORKDIR /src
# aws-lc-sys (TLS of the AWS SDK) builds C code; cmake covers its fallback build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
COPY . .
# the registry and the target folder are build caches: a rebuild after a
# code change compiles muster's crates only
# one target cache per platform: a multi-platform build (docker buildx
# --platform linux/amd64,linux/arm64) runs both stages at once, and a shared
# folder would mix their binaries
ARG TARGETPLATFORM
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,id=muster-target-${TARGETPLATFORM} \
    cargo build --release --locked --features "${FEATURES}" --bin muster \
 && install -D -m 0755 target/release/muster /out/muster

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/muster /usr/local/bin/muster
# the chart's securityContext runs as this user too (65532, "nonroot")
USER 65532:65532
EXPOSE 8080 9443
ENTRYPOINT ["/usr/local/bin/muster"]
CMD ["controller"]
