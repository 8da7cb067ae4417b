GO       ?= go
BINARY   := gke-disruption-exporter
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X github.com/prometheus/common/version.Version=$(VERSION) \
            -X github.com/prometheus/common/version.Revision=$(shell git rev-parse --short HEAD 2>/dev/null) \
            -X github.com/prometheus/common/version.Branch=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null)
TOOLS    := etcd kube-apiserver promtool prometheus alertmanager helm

.PHONY: all build test lint tools bench generate check-generated

all: lint build test

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/$(BINARY) ./cmd/$(BINARY)

# tools builds the pinned kube-apiserver, etcd, Prometheus, promtool, Alertmanager and Helm into bin/ (once per version),
# all at once: each build leaves cores idle while it links.
tools:
	@pids=; for t in $(TOOLS); do ./tools/build.sh $$t >/dev/null & pids="$$pids $$!"; done; \
	for p in $$pids; do wait $$p || exit 1; done

# test runs every test, the real-component integration tests included. build first: the release test builds the
# binary with the same flags, and finds it compiled.
test: tools lint build
	$(GO) test -race -count=1 -timeout 20m ./...

# generate renders the monitoring mixin (mixin/) into rules/ and dashboards/; commit the result.
generate:
	$(GO) run ./cmd/mixin-generate --output-dir=.
	$(GO) generate ./deploy

# check-generated fails when rules/ or dashboards/ differ from what the mixin renders (make test checks it too,
# in TestGeneratedFilesUpToDate).
check-generated:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(GO) run ./cmd/mixin-generate --output-dir="$$tmp" && \
	diff -r "$$tmp/rules" rules && diff -r "$$tmp/dashboards" dashboards || \
	{ echo "rules/ or dashboards/ are stale: run make generate"; exit 1; }

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$$(tools/build.sh staticcheck) ./...

# bench runs the benchmarks and prints them as a table.
bench: tools
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./... | $(GO) run ./internal/benchtable

# image builds the container image for every platform in PLATFORMS with docker buildx (a builder that can target
# several platforms: `docker buildx create --use`); IMAGE_PUSH=true pushes it to IMAGE.
IMAGE      ?= ghcr.io/gke-disruption-exporter/gke-disruption-exporter
PLATFORMS  ?= linux/amd64,linux/arm64
IMAGE_PUSH ?= false

.PHONY: image
image:
	docker buildx build --platform $(PLATFORMS) \
		--build-arg VERSION=$(VERSION) \
		--build-arg REVISION=$(shell git rev-parse --short HEAD 2>/dev/null) \
		--build-arg BRANCH=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null) \
		--tag $(IMAGE):$(VERSION) \
		--output type=image,push=$(IMAGE_PUSH) .

# demo runs the whole product against simulated GKE on this machine: a day of maintenance, a failing GPU, a TPU
# slice and Spot preemptions in five minutes, with a live summary. Ctrl-C stops it and removes its files.
.PHONY: demo
demo: build
	$(GO) build -o bin/gkesim ./cmd/gkesim
	./bin/gkesim demo --exporter=bin/$(BINARY)

# release prepares release VERSION (make release VERSION=v1.2.3): the image tag in the kustomize base, the example
# overlay and the chart (version, appVersion); one static install.yaml per overlay, the packaged chart, the
# kubectl plugin archives (RELEASE_PLATFORMS, default linux and darwin on amd64 and arm64) and their krew manifest in
# dist/. Commit, then tag: docs/install.md, "Releases".
.PHONY: release
release:
	./tools/release.sh $(VERSION)
