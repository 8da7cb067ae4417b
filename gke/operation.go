package gke

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// GKE's own work on a node, and the planned end of a VM with a bounded run duration. GKE labels a node it is about
// to drain for an upgrade or resize with LabelOperationType (value "drain", as ingress-gce spells it), and may name
// the operation in AnnotationCurrentOperation, an object with operation_type (UPGRADE_NODES, AUTO_REPAIR_NODES, …)
// and lock_end_timestamp; neither is documented, so both are read when present and never required. Flex-start and
// queued-provisioning VMs run at most NodeConfig.max_run_duration; GKE writes their planned end, RFC 3339, into
// AnnotationMachineTerminationDatetime.
const (
	LabelOperationType                   = "operation.gke.io/type"
	AnnotationCurrentOperation           = "gke-current-operation"
	AnnotationMachineTerminationDatetime = "node.gke.io/machine-termination-datetime"
	// TerminationMaxRunDuration is the reason of the planned end AnnotationMachineTerminationDatetime gives.
	TerminationMaxRunDuration = "max_run_duration"
)

// Operations is GKE's work on a node from its label and annotation: the operation types lower-cased ("drain",
// "upgrade_nodes"), sorted, each once; none when GKE shows none. An annotation that does not read (not an
// object, or without an operation_type) gives an error and leaves the label's type.
func Operations(labels, annotations map[string]string) ([]string, error) {
	var ops []string
	if t := strings.ToLower(strings.TrimSpace(labels[LabelOperationType])); t != "" {
		ops = append(ops, t)
	}
	var err error
	if raw, ok := annotations[AnnotationCurrentOperation]; ok {
		var t string
		if t, err = parseCurrentOperation(raw); err == nil {
			ops = append(ops, t)
		}
	}
	slices.Sort(ops)
	return slices.Compact(ops), err
}

// parseCurrentOperation reads the operation type of AnnotationCurrentOperation, JSON or YAML.
func parseCurrentOperation(raw string) (string, error) {
	var doc struct {
		OperationType string `json:"operation_type"`
	}
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return "", fmt.Errorf("annotation %s %s is not an object: %w", AnnotationCurrentOperation, Quote(raw), err)
	}
	t := strings.ToLower(strings.TrimSpace(doc.OperationType))
	if t == "" {
		return "", fmt.Errorf("annotation %s %s names no operation_type", AnnotationCurrentOperation, Quote(raw))
	}
	return t, nil
}

// ParseTerminationTime reads AnnotationMachineTerminationDatetime.
func ParseTerminationTime(raw string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(raw))
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s %s is not an RFC 3339 time", AnnotationMachineTerminationDatetime, Quote(raw))
	}
	return t, nil
}
