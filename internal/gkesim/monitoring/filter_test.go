package monitoring

import (
	"strings"
	"testing"
)

func TestParseFilterMatches(t *testing.T) {
	node := &series{
		metricType:   MetricNodeInterruptions,
		resourceType: ResourceNode,
		resourceLabels: map[string]string{
			"project_id": "p1", "location": "us-central1", "cluster_name": "train", "node_name": "n1",
		},
		metricLabels: map[string]string{"interruption_type": "MaintenanceEvent", "interruption_reason": "HW/SW Maintenance"},
	}
	const metric = `metric.type = "kubernetes.io/node/interruption_count"`
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{metric, true},
		{`metric.type="kubernetes.io/node_pool/interruption_count"`, false},
		{metric + ` AND resource.type = "k8s_node"`, true},
		{metric + ` AND resource.type = "k8s_node_pool"`, false},
		{metric + ` AND resource.labels.cluster_name = "train"`, true},
		{metric + ` AND resource.label.cluster_name = "serve"`, false},
		{metric + ` AND resource.labels.cluster_name = one_of("serve", "train")`, true},
		{metric + ` AND resource.labels.cluster_name = one_of("serve")`, false},
		{metric + ` AND resource.labels.cluster_name != "train"`, false},
		{metric + ` AND resource.labels.cluster_name != one_of("a", "b")`, true},
		{metric + ` AND (resource.labels.cluster_name = "a" OR resource.labels.cluster_name = "train")`, true},
		{metric + ` AND NOT resource.labels.cluster_name = "train"`, false},
		{metric + ` AND metric.labels.interruption_reason = "HW/SW Maintenance"`, true},
		{metric + ` AND metric.label.interruption_reason = "HW/SW \"Maintenance\""`, false},
		{metric + ` AND metric.labels.missing = ""`, false},
		{metric + ` AND metric.labels.missing != "x"`, true},
		{metric + ` AND project = "p1"`, true},
		{metric + ` AND project = "p2"`, false},
	} {
		f, err := parseFilter(tc.filter)
		if err != nil {
			t.Errorf("parseFilter(%s): %v", tc.filter, err)
			continue
		}
		wantType := MetricNodeInterruptions
		if strings.Contains(tc.filter, "node_pool/interruption_count") {
			wantType = MetricNodePoolInterruptions
		}
		if f.metricType != wantType {
			t.Errorf("parseFilter(%s) metric type = %q, want %q", tc.filter, f.metricType, wantType)
		}
		if got := f.root.match(node); got != tc.want {
			t.Errorf("%s matches = %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestParseFilterRejects(t *testing.T) {
	const metric = `metric.type = "kubernetes.io/node/interruption_count"`
	for _, tc := range []struct {
		filter, wantErr string
	}{
		{``, "expected a selector"},
		{`resource.type = "k8s_node"`, "exactly one metric type"},
		{`metric.type = one_of("a", "b")`, "exactly one metric type"},
		{`metric.type = "a" OR metric.type = "b"`, "exactly one metric type"},
		{metric + ` AND metric.type = "other"`, "exactly one metric type"},
		{metric + ` AND resource.labels.zone = starts_with("us")`, "unsupported value"},
		{metric + ` AND resource.labels.zone = monitoring.regex.full_match("us.*")`, "unsupported value"},
		{metric + ` AND resource.labels.zone = us-central1`, "unsupported character"},
		{metric + ` AND resource.labels.zone =~ "us"`, "unsupported character"},
		{metric + ` AND resource.labels.zone > "us"`, "unsupported character"},
		{metric + ` AND group.id = "1"`, "unsupported selector"},
		{metric + ` AND resource.labels. = "x"`, "bad label selector"},
		{metric + ` AND resource.labels.a = "x" OR resource.labels.b = "y"`, "use parentheses"},
		{metric + ` resource.labels.a = "x"`, "unexpected"},
		{metric + ` AND (resource.labels.a = "x"`, "expected ')'"},
		{metric + ` AND resource.labels.a = "x`, "unterminated string"},
		{metric + ` AND resource.labels.a = one_of("x" "y")`, "expected ',' or ')'"},
		{metric + ` AND resource.labels.a = one_of()`, "a string in one_of"},
		{metric + ` AND resource.labels.a "x"`, "expected = or !="},
	} {
		_, err := parseFilter(tc.filter)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("parseFilter(%s) error = %v, want one containing %q", tc.filter, err, tc.wantErr)
		}
	}
}
