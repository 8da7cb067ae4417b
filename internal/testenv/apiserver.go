package testenv

import (
	"context"
	"testing"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/localenv"
)

// APIServer is a real kube-apiserver backed by a real etcd, both on loopback, with a fresh data directory. Config
// (cluster admin), Client and Kubeconfig come from the embedded localenv.APIServer.
type APIServer struct {
	*localenv.APIServer
	t testing.TB
}

// StartAPIServer starts etcd and kube-apiserver and stops them when the test ends.
func StartAPIServer(t testing.TB) *APIServer {
	t.Helper()
	srv, err := localenv.StartAPIServer(localenv.APIServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &APIServer{APIServer: srv, t: t}
	t.Cleanup(func() {
		if t.Failed() {
			if logs := srv.Logs(4000); logs != "" {
				t.Logf("kube-apiserver/etcd log tail:\n%s", logs)
			}
		}
		srv.Stop()
	})
	return s
}

// Restart stops kube-apiserver and starts it again on the same port, certificates and etcd, so clients built from
// Config keep working once it is back.
func (s *APIServer) Restart() {
	s.t.Helper()
	s.StopAPIServer()
	s.StartAgain()
}

// StartAgain starts kube-apiserver after StopAPIServer.
func (s *APIServer) StartAgain() {
	s.t.Helper()
	if err := s.APIServer.StartAgain(); err != nil {
		s.t.Fatal(err)
	}
}

// Namespace creates a namespace with a unique name for one test.
func (s *APIServer) Namespace(prefix string) string {
	s.t.Helper()
	ns := prefix + "-" + randomToken(s.t)[:8]
	if err := createNamespace(context.Background(), s.Client, ns); err != nil {
		s.t.Fatal(err)
	}
	return ns
}
