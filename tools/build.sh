#!/usr/bin/env bash
# Builds one pinned tool from its module under tools/ into bin/NAME-VERSION, unless that file exists.
# Prints the binary's path. Usage: tools/build.sh NAME
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=$1
case $name in
  kube-apiserver) dir=kubernetes; mod=k8s.io/kubernetes; pkg=k8s.io/kubernetes/cmd/kube-apiserver ;;
  etcd)           dir=kubernetes; mod=go.etcd.io/etcd/server/v3; pkg=go.etcd.io/etcd/server/v3 ;;
  prometheus)     dir=prometheus; mod=github.com/prometheus/prometheus; pkg=github.com/prometheus/prometheus/cmd/prometheus ;;
  promtool)       dir=prometheus; mod=github.com/prometheus/prometheus; pkg=github.com/prometheus/prometheus/cmd/promtool ;;
  staticcheck)    dir=staticcheck; mod=honnef.co/go/tools; pkg=honnef.co/go/tools/cmd/staticcheck ;;
  alertmanager)   dir=alertmanager; mod=github.com/prometheus/alertmanager; pkg=github.com/prometheus/alertmanager/cmd/alertmanager ;;
  helm)           dir=helm; mod=helm.sh/helm/v3; pkg=helm.sh/helm/v3/cmd/helm ;;
  kube-state-metrics) dir=kube-state-metrics; mod=k8s.io/kube-state-metrics/v2; pkg=k8s.io/kube-state-metrics/v2 ;;
  *) echo "tools/build.sh: unknown tool $name" >&2; exit 2 ;;
esac
version=$(awk -v m="$mod" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$root/tools/$dir/go.mod")
[ -n "$version" ] || { echo "tools/build.sh: no version of $mod in tools/$dir/go.mod" >&2; exit 1; }
out="$root/bin/$name-$version"
mkdir -p "$root/bin"
# Test packages run in parallel: one builds, the others wait for it.
exec 9>"$out.lock"
flock 9
if [ ! -x "$out" ]; then
  echo "building $name $version" >&2
  (cd "$root/tools/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out.tmp" "$pkg") && mv "$out.tmp" "$out"
fi
echo "$out"
