package gke

import "testing"

func TestFaultReportSupported(t *testing.T) {
	for machineType, want := range map[string]bool{
		"a4x-maxgpu-4g-metal": true,
		"a4x-highgpu-4g":      true,
		"a4-highgpu-8g":       true,
		"a3-ultragpu-8g":      true,
		"a3-megagpu-8g":       true,
		"a3-highgpu-8g":       true,
		"a3-highgpu-4g":       false, // A3 High only with 8 GPUs
		"a3-highgpu-1g":       false,
		"g2-standard-8":       false,
		"ct5lp-hightpu-4t":    false,
		"":                    false,
	} {
		if got := FaultReportSupported(machineType); got != want {
			t.Errorf("FaultReportSupported(%q) = %v, want %v", machineType, got, want)
		}
	}
}

func TestParseFaultBehavior(t *testing.T) {
	for in, want := range map[string]FaultBehavior{"": FaultUnspecified, "xid": FaultXID, "XID": FaultXID, "sdc": FaultSDC,
		"Performance": FaultPerformance, "UNSPECIFIED": FaultUnspecified} {
		if got, ok := ParseFaultBehavior(in); !ok || got != want {
			t.Errorf("ParseFaultBehavior(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := ParseFaultBehavior("ECC"); ok {
		t.Error("ParseFaultBehavior(ECC) accepted an unknown behavior")
	}
}

func TestParseReportStatus(t *testing.T) {
	for in, want := range map[string]ReportStatus{"PodsEvicted": ReportPodsEvicted, "OperationRUNNING": ReportOperationRunning,
		"operationrunning": ReportOperationRunning, "OperationDone": ReportOperationDone, "Error": ReportError,
		"ERROR": ReportError, "Pending": "Pending", "": ""} {
		if got := ParseReportStatus(in); got != want {
			t.Errorf("ParseReportStatus(%q) = %q, want %q", in, got, want)
		}
	}
	for s, final := range map[ReportStatus]bool{ReportPodsEvicted: false, ReportOperationRunning: false,
		ReportOperationDone: true, ReportError: true, "": false} {
		if s.Final() != final {
			t.Errorf("%q.Final() = %v", s, !final)
		}
	}
}

func TestMachineType(t *testing.T) {
	if got := MachineType(map[string]string{LabelInstanceTypeDeprecated: "a4-highgpu-8g"}); got != "a4-highgpu-8g" {
		t.Errorf("deprecated label: %q", got)
	}
	if got := MachineType(map[string]string{LabelInstanceType: "a3-megagpu-8g", LabelInstanceTypeDeprecated: "x"}); got != "a3-megagpu-8g" {
		t.Errorf("both labels: %q", got)
	}
}
