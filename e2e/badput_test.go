package e2e

import (
	"fmt"
	"testing"
	"time"
)

// fieldRepair is how long GKE took in the field from perform-maintenance=true on a failed a4-highgpu-8g node until
// the node was Ready again (../shared/design.md, "Measured in the field": 4 h 51 m and 4 h 28 m).
const fieldRepair = 4*time.Hour + 51*time.Minute

// fieldWindow is how far out GKE booked the repair of that failed GPU: 7 days.
const fieldWindow = 7 * 24 * time.Hour

// fieldNotice is how long after a real Xid 79 GKE announced its repair in the field (19 min to 5 h 36 min after
// synthetic ones).
const fieldNotice = 26 * time.Minute

// BenchmarkBadput is the GPU time a failed host costs, from GKE's notice (FAILURE_* maintenance, window 7 days out)
// until the repair starts and until the node is Ready again: with no product (computed: the node waits for its
// window), and measured on the whole product over the simulator's field replay (testdata/field.yaml) with the
// default policy and with `repair:`. The product's part (notice to request) is measured on the wall clock with 1 s
// scrape and rule intervals; node-hours add GKE's repair as measured in the field.
func BenchmarkBadput(b *testing.B) {
	b.Run("policy=none", func(b *testing.B) {
		for range b.N {
			b.ReportMetric(fieldWindow.Hours(), "h-to-repair-start")
			b.ReportMetric((fieldWindow + fieldRepair).Hours(), "node-h")
		}
	})
	for _, policy := range []struct{ name, file string }{
		{"default", "testdata/field-policy-default.yaml"},
		{"repair", "testdata/field-policy.yaml"},
	} {
		b.Run("policy="+policy.name, func(b *testing.B) {
			for range b.N {
				s, w, alive := startStack(b, "testdata/field.yaml", policy.file, nil)
				begin := time.Now()
				node := s.sc.NodeName("a4-train", 0)
				var requested time.Time
				alive("the repair requested", func() error {
					return w.check(node, func(h []nodeView) error {
						for _, v := range h {
							if v.perform {
								requested = v.at
								return nil
							}
						}
						return fmt.Errorf("not requested")
					})
				})
				toRequest := requested.Sub(begin)
				b.ReportMetric(toRequest.Seconds(), "s-to-request")
				b.ReportMetric(toRequest.Hours(), "h-to-repair-start")
				b.ReportMetric((toRequest + fieldRepair).Hours(), "node-h")
				s.Close()
			}
		})
	}
}

// BenchmarkBadputFromFault is the GPU time a failed GPU costs from the fault itself (Xid 79), until the repair
// starts and until the node is Ready again: with no product (GKE's notice fieldNotice later, then its window); with
// the product acting on GKE's notice (fieldNotice, then the product's notice-to-request measured as in
// BenchmarkBadput); and with the product acting on the fault (GKENodeGPUFailed from the node's XidCriticalError
// condition, then report-faulty-host), measured on the whole product over the simulator, with rules and scrapes
// every second (scaled) and every 30 s (production). Node-hours add GKE's repair as measured in the field.
func BenchmarkBadputFromFault(b *testing.B) {
	b.Run("product=none", func(b *testing.B) {
		for range b.N {
			b.ReportMetric((fieldNotice + fieldWindow).Hours(), "h-to-repair-start")
			b.ReportMetric((fieldNotice + fieldWindow + fieldRepair).Hours(), "node-h")
		}
	})
	for _, interval := range []time.Duration{time.Second, 30 * time.Second} {
		for _, on := range []struct{ name, scenario string }{
			{"notice", "testdata/field.yaml"},
			{"fault", "testdata/field-gpu-fault.yaml"},
		} {
			b.Run(fmt.Sprintf("product=on-%s/interval=%s", on.name, interval), func(b *testing.B) {
				for range b.N {
					s, w, alive := startStackEvery(b, on.scenario, "testdata/field-policy.yaml", interval)
					begin := time.Now()
					node := s.sc.NodeName("a4-train", 0)
					var requested time.Time
					alive("the repair requested", func() error {
						return w.check(node, func(h []nodeView) error {
							for _, v := range h {
								if v.perform || v.fault != "" {
									requested = v.at
									return nil
								}
							}
							return fmt.Errorf("not requested")
						})
					})
					toRequest := requested.Sub(begin)
					if on.name == "notice" {
						toRequest += fieldNotice
					}
					b.ReportMetric(toRequest.Seconds(), "s-to-request")
					b.ReportMetric(toRequest.Hours(), "h-to-repair-start")
					b.ReportMetric((toRequest + fieldRepair).Hours(), "node-h")
					s.Close()
				}
			})
		}
	}
}
