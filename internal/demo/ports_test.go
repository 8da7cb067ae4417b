package demo

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestPortsAvailable takes a port and a port inside a range: the component on it, and the whole range, move to
// free ports; the others keep theirs.
func TestPortsAvailable(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	free, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	got, moved := Ports{Prometheus: port, Alertmanager: free, NodeAgents: port - 2}.Available(3)
	if got.Prometheus != 0 || got.NodeAgents != 0 || got.Alertmanager != free || len(moved) != 2 {
		t.Errorf("Available: %+v, moved %v; want Prometheus and the node agents' range moved, Alertmanager kept", got, moved)
	}
	if !strings.Contains(strings.Join(moved, ","), fmt.Sprintf("Prometheus (%d)", port)) {
		t.Errorf("moved %v does not name Prometheus and its port", moved)
	}
}
