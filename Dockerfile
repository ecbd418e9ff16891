# The manager image: one static binary, /manager, and Debian's CA bundle at
# /etc/ssl/certs/ca-certificates.crt (the path and content of CAPD's distroless image), nothing else.
# The manager reads the bundle only when its kubeconfig has no certificate-authority(-data): with
# `insecure-skip-tls-verify: true`, or for a server whose certificate a public CA signed. To trust
# a private CA instead, mount a bundle over that file (or point SSL_CERT_FILE at one, which adds to it).
#
# Two ways to build it:
# - With a registry (BuildKit, the default builder of current Docker):
#     docker build -t localhost/capd-rs-manager:dev .
#   compiles the binary in BUILDER_IMAGE and copies it onto RUNTIME_IMAGE (last stage below).
# - Without a registry (this project's machines): hack/image-build.sh compiles the static binary on the
#   host, assembles the CA bundle from the host's Debian ca-certificates package (never the host's
#   own additions), and builds `--target prebuilt` onto RUNTIME_IMAGE=scratch, so no base image is
#   pulled.
# Both base images are build arguments, so locally imported images can stand in for the defaults.
#
# The image runs as the unprivileged uid/gid 65532 by default. The Deployment in config/manager overrides
# this with uid 0 (and no capabilities), because the mounted Docker socket is accessible to root only.

ARG BUILDER_IMAGE=docker.io/library/rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot
ARG TARGET=x86_64-unknown-linux-gnu

# A binary built on the host by hack/image-build.sh, and the CA bundle it assembled. First in the file
# so that the legacy builder, which builds every stage up to the target, needs no other base image for it.
FROM ${RUNTIME_IMAGE} AS prebuilt
ARG TARGET
COPY target/image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY target/${TARGET}/release/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

FROM ${BUILDER_IMAGE} AS builder
ARG TARGET
WORKDIR /src
COPY . .
# glibc linked statically (crt-static): the binary runs on an image without a C library.
RUN RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release --locked --target "${TARGET}" --bin manager \
 && cp "target/${TARGET}/release/manager" /manager

FROM ${RUNTIME_IMAGE}
# The builder's bundle is Debian's ca-certificates (the builder image is Debian); a RUNTIME_IMAGE of
# scratch would have none.
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
