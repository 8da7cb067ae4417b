# syntax=docker/dockerfile:1
# Multi-arch image of gke-disruption-exporter: `make image` (docker buildx) builds linux/amd64 and linux/arm64.
# The builder runs on the build machine's own platform and cross-compiles, so no emulation is needed.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w \
        -X github.com/prometheus/common/version.Version=${VERSION} \
        -X github.com/prometheus/common/version.Revision=${REVISION} \
        -X github.com/prometheus/common/version.Branch=${BRANCH}" \
      -o /out/gke-disruption-exporter ./cmd/gke-disruption-exporter

# A static binary needs no libc: distroless static has CA certificates, tzdata (policy windows name time zones)
# and a non-root user (65532), and nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gke-disruption-exporter /bin/gke-disruption-exporter
USER 65532:65532
EXPOSE 9842 9843 9844
ENTRYPOINT ["/bin/gke-disruption-exporter"]
