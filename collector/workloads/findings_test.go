package workloads

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/readiness"
)

// TestFindingsMatchSeries: Findings says what the gke_readiness_findings samples say, sample for sample, as the
// cluster changes under it.
func TestFindingsMatchSeries(t *testing.T) {
	cache := owners{}
	s := newState(testConfig, cache.lookup)
	agree := func(step string) {
		t.Helper()
		var fromSeries []string
		for _, l := range strings.Split(text(t, s), "\n") {
			if strings.HasPrefix(l, "gke_readiness_findings{") {
				fromSeries = append(fromSeries, l)
			}
		}
		var fromFindings []string
		for _, f := range s.findings(nil) {
			name := readiness.Checks[f.Check].Name
			if f.Workload == (Workload{}) {
				fromFindings = append(fromFindings, fmt.Sprintf(`gke_readiness_findings{check=%q} %d`, name, f.Pods))
				continue
			}
			fromFindings = append(fromFindings, fmt.Sprintf(`gke_readiness_findings{check=%q,namespace=%q,workload=%q,workload_kind=%q} %d`,
				name, f.Workload.Namespace, f.Workload.Name, f.Workload.Kind, f.Pods))
		}
		// The series are in the workloads' order, the findings sorted: compare as sets.
		if !slices.Equal(slices.Sorted(slices.Values(fromSeries)), slices.Sorted(slices.Values(fromFindings))) {
			t.Errorf("%s: series\n%s\nfindings\n%s", step, strings.Join(fromSeries, "\n"), strings.Join(fromFindings, "\n"))
		}
	}
	agree("empty cluster")
	if got := s.findings(nil); got != nil {
		t.Errorf("empty cluster: %v", got)
	}
	s.setNode(gpuNode("n1", 0))
	agree("a GPU node, graceful termination off")
	rs := &ownerInput{apiVersion: "apps/v1", kind: "ReplicaSet", name: "web-abc", uid: "rs"}
	cache["rs"] = &ownerInput{apiVersion: "apps/v1", kind: "Deployment", name: "web", uid: "d"}
	s.setPod(&podInput{namespace: "serving", name: "web-abc-1", node: "n1", owner: rs, grace: 5}, true)
	s.setPod(&podInput{namespace: "serving", name: "web-abc-2", node: "n1", owner: rs, grace: 5, tolerates: true}, true)
	s.setPod(&podInput{namespace: "batch", name: "debug", node: "n1", grace: 600, tolerates: true}, true)
	agree("short grace and tolerations")
	want := []Finding{
		{Check: readiness.CheckGracefulTerminationDisabled, Pods: 1},
		{Check: readiness.CheckGracePeriodShort, Workload: Workload{"serving", "Deployment", "web"}, Pods: 2},
		{Check: readiness.CheckToleratesTerminationTaint, Workload: Workload{"batch", "Pod", "debug"}, Pods: 1},
		{Check: readiness.CheckToleratesTerminationTaint, Workload: Workload{"serving", "Deployment", "web"}, Pods: 1},
	}
	if got := s.findings(nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("findings:\n%v\nwant\n%v", got, want)
	}
	// On n2 only: the pods there, the cluster's own check as ever.
	s.setNode(gpuNode("n2", 0))
	s.setPod(&podInput{namespace: "serving", name: "web-abc-3", node: "n2", owner: rs, grace: 5}, true)
	onN2 := s.findings(func(node string) bool { return node == "n2" })
	want = []Finding{want[0], {Check: readiness.CheckGracePeriodShort, Workload: Workload{"serving", "Deployment", "web"}, Pods: 1}}
	if fmt.Sprint(onN2) != fmt.Sprint(want) {
		t.Errorf("findings on n2:\n%v\nwant\n%v", onN2, want)
	}
	if all := s.findings(func(string) bool { return true }); fmt.Sprint(all) != fmt.Sprint(s.findings(nil)) {
		t.Errorf("findings on every node:\n%v\nwant all findings\n%v", all, s.findings(nil))
	}
	agree("a second node")
	s.setGracefulTermination(true)
	s.deletePod("serving", "web-abc-2")
	agree("graceful termination on, a pod gone")
}
