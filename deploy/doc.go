// Package deploy holds the Kubernetes manifests of gke-disruption-exporter, as kustomize bases, components and
// overlays and a Helm chart, and the tests that build them and apply them to a real API server.
//
// kustomize reads only files inside the kustomization that names them, and Helm only files inside the chart, so
// the components carry copies of the rule resources and dashboards the mixin generates into rules/ and
// dashboards/operator-gmp/ (both for the labels the shipped scrape configurations produce), and the chart carries
// copies of the base and components it renders (helm/*/files). `go generate ./deploy` (part of `make generate`)
// refreshes the copies; the tests fail while a copy differs from its source.
package deploy

//go:generate cp ../rules/prometheusrule.yaml components/prometheus-operator/prometheusrule.yaml
//go:generate cp ../rules/gmp-rules.yaml components/google-managed-prometheus/gmp-rules.yaml
//go:generate sh -c "rm -rf components/prometheus-operator/dashboards && mkdir -p components/prometheus-operator/dashboards && cp ../dashboards/operator-gmp/*.json components/prometheus-operator/dashboards/"
//go:generate sh -c "rm -rf helm/gke-disruption-exporter/files && mkdir -p helm/gke-disruption-exporter/files/components && cp -r base helm/gke-disruption-exporter/files/ && rm helm/gke-disruption-exporter/files/base/kustomization.yaml && cp -r components/google-managed-prometheus components/prometheus-operator helm/gke-disruption-exporter/files/components/ && rm helm/gke-disruption-exporter/files/components/*/kustomization.yaml && mv helm/gke-disruption-exporter/files/components/prometheus-operator/dashboards helm/gke-disruption-exporter/files/"
