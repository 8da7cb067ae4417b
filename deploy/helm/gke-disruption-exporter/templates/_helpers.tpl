{{/*
The chart renders the objects of the kustomize base and components (copies under files/, refreshed by
`go generate ./deploy`) and applies the values to them, so that the chart and the overlays cannot drift.
*/}}

{{/* labels: what Helm adds to every object's own labels (never to selectors, which are immutable). */}}
{{- define "gke-disruption-exporter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gke-disruption-exporter
{{- end }}

{{/* documents: the objects of a multi-document YAML file under files/, as a list. */}}
{{- define "gke-disruption-exporter.documents" -}}
{{- $out := list }}
{{- range $doc := splitList "\n---\n" (.root.Files.Get .path) }}
{{- $obj := fromYaml $doc }}
{{- if $obj.kind }}{{ $out = append $out $obj }}{{ end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
object renders one object of the base or a component: the release's namespace for the install's own, Helm's
labels, and the values of its component for workloads and ServiceAccounts.
*/}}
{{- define "gke-disruption-exporter.object" -}}
{{- $root := .root }}
{{- $obj := .obj }}
{{- $v := $root.Values }}
{{- $meta := $obj.metadata }}
{{- if eq (default "" $meta.namespace) "gke-disruption-exporter" }}{{ $_ := set $meta "namespace" $root.Release.Namespace }}{{ end }}
{{- $_ := set $meta "labels" (merge (default dict $meta.labels) (include "gke-disruption-exporter.labels" $root | fromYaml) (default dict .labels)) }}
{{- range $s := default list $obj.subjects }}
{{- if eq (default "" $s.namespace) "gke-disruption-exporter" }}{{ $_ := set $s "namespace" $root.Release.Namespace }}{{ end }}
{{- end }}
{{- $component := index (default dict $meta.labels) "app.kubernetes.io/component" | default "" }}
{{- if and (eq $obj.kind "ServiceAccount") (has $component (list "cluster" "actions")) }}
{{- with (index $v $component).serviceAccount.annotations }}{{ $_ := set $meta "annotations" (merge (default dict $meta.annotations) .) }}{{ end }}
{{- end }}
{{- if has $obj.kind (list "Deployment" "DaemonSet") }}
{{- $cv := index $v $component }}
{{- $pod := $obj.spec.template.spec }}
{{- $c := index $pod.containers 0 }}
{{- $_ := set $c "image" (printf "%s:%s" $v.image.repository (default $root.Chart.AppVersion $v.image.tag)) }}
{{- with $v.image.pullPolicy }}{{ $_ := set $c "imagePullPolicy" . }}{{ end }}
{{- $_ := set $c "args" (concat $c.args $cv.extraArgs) }}
{{- $_ := set $c "resources" $cv.resources }}
{{- if $cv.priorityClassName }}{{ $_ := set $pod "priorityClassName" $cv.priorityClassName }}{{ else }}{{ $_ := unset $pod "priorityClassName" }}{{ end }}
{{- if $cv.tolerations }}{{ $_ := set $pod "tolerations" $cv.tolerations }}{{ else }}{{ $_ := unset $pod "tolerations" }}{{ end }}
{{- with $cv.nodeSelector }}{{ $_ := set $pod "nodeSelector" . }}{{ end }}
{{- with $cv.affinity }}{{ $_ := set $pod "affinity" . }}{{ end }}
{{- end }}
{{- if and (eq $obj.kind "NetworkPolicy") $v.actions.networkPolicy.ingress }}
{{- $_ := set $obj.spec "ingress" $v.actions.networkPolicy.ingress }}
{{- end }}
{{- toYaml $obj }}
{{- end }}
