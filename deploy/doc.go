// Package deploy holds the Kubernetes manifests of gke-disruption-exporter, as kustomize bases, components and
// overlays, and the tests that build them and apply them to a real API server.
//
// kustomize reads only files inside the kustomization that names them, so the components carry copies of the
// rule resources the mixin generates into rules/. `go generate ./deploy` refreshes the copies; the tests fail
// while a copy differs from its source.
package deploy

//go:generate cp ../rules/prometheusrule.yaml components/prometheus-operator/prometheusrule.yaml
//go:generate cp ../rules/gmp-rules.yaml components/google-managed-prometheus/gmp-rules.yaml
