#!/usr/bin/env bash
# Prepares release VERSION (vMAJOR.MINOR.PATCH[-PRE]): sets the image tag in the kustomize base and the example
# overlay and the chart's version and appVersion, renders one static install.yaml per overlay, the packaged
# chart, the kubectl plugin archives and their krew manifest into dist/. Commit the changed files, tag VERSION,
# and publish dist/ with the release. Usage: tools/release.sh VERSION
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=${1:-}
if ! [[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "tools/release.sh: VERSION must look like v1.2.3 or v1.2.3-rc.1, got '$version'" >&2
  exit 2
fi
platforms=${RELEASE_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
repo=https://github.com/gke-disruption-exporter/gke-disruption-exporter

# The image tag everywhere an install names it.
sed -i -E "s/^(    newTag: ).*/\1$version/" deploy/base/kustomization.yaml deploy/examples/overlay/kustomization.yaml
sed -i -E "s/^version: .*/version: ${version#v}/; s/^appVersion: .*/appVersion: $version/" deploy/helm/gke-disruption-exporter/Chart.yaml

rm -rf dist && mkdir -p dist
for overlay in deploy/overlays/*/; do
  name=$(basename "$overlay")
  go run ./deploy/render "$overlay" > "dist/install-$name.yaml"
done
"$(tools/build.sh helm)" package deploy/helm/gke-disruption-exporter --destination dist >/dev/null

# The kubectl plugin: the binary, named so that kubectl finds it as `kubectl gke-disruption`.
entries=""
for p in $platforms; do
  os=${p%/*} arch=${p#*/}
  dir=$(mktemp -d)
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version -X github.com/prometheus/common/version.Revision=$(git rev-parse --short HEAD) -X github.com/prometheus/common/version.Branch=$(git rev-parse --abbrev-ref HEAD)" \
    -o "$dir/kubectl-gke_disruption" ./cmd/gke-disruption-exporter
  archive="kubectl-gke_disruption_${version}_${os}_${arch}.tar.gz"
  tar -C "$dir" -czf "dist/$archive" kubectl-gke_disruption
  rm -rf "$dir"
  sha=$(sha256sum "dist/$archive" | cut -d' ' -f1)
  entries+="    - selector:
        matchLabels:
          os: $os
          arch: $arch
      uri: $repo/releases/download/$version/$archive
      sha256: $sha
      bin: kubectl-gke_disruption
"
done
awk -v version="$version" -v platforms="${entries%$'\n'}" \
  '{gsub(/@VERSION@/, version); if ($0 == "@PLATFORMS@") print platforms; else print}' \
  deploy/krew/gke-disruption.yaml.tmpl > dist/gke-disruption.yaml
echo "release $version prepared in dist/: commit, then git tag $version && git push origin $version" >&2
