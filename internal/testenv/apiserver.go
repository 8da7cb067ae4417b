package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIServer is a real kube-apiserver backed by a real etcd, both on loopback, with a fresh data directory.
type APIServer struct {
	// Config authenticates as a cluster admin (group system:masters).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file for Config, for binaries under test.
	Kubeconfig string

	t         testing.TB
	dir       string
	apiPort   int
	etcdURL   string
	apiserver *process
	etcd      *process
	logFile   *os.File
}

// StartAPIServer starts etcd and kube-apiserver and stops them when the test ends.
func StartAPIServer(t testing.TB) *APIServer {
	t.Helper()
	apiserverBin, etcdBin := Binary(t, "kube-apiserver"), Binary(t, "etcd")
	dir, err := os.MkdirTemp("", "testenv-apiserver-")
	if err != nil {
		t.Fatal(err)
	}
	s := &APIServer{t: t, dir: dir}
	t.Cleanup(s.stop)
	if s.logFile, err = os.Create(filepath.Join(dir, "components.log")); err != nil {
		t.Fatal(err)
	}

	clientPort, peerPort := freePort(t), freePort(t)
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	s.etcd = s.command(etcdBin,
		"--name=testenv",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+s.etcdURL,
		"--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=testenv="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err := s.etcd.start(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}

	token := randomToken(t)
	writeFile(t, filepath.Join(dir, "tokens.csv"), token+`,admin,admin,"system:masters"`+"\n")
	writeServiceAccountKey(t, filepath.Join(dir, "sa.key"))
	s.apiPort = freePort(t)
	if err := s.startAPIServer(apiserverBin); err != nil {
		t.Fatal(err)
	}

	s.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(s.apiPort),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, "certs", "apiserver.crt")},
		QPS:             1000,
		Burst:           2000,
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		t.Fatal(err)
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(s.Kubeconfig, s.Config); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *APIServer) startAPIServer(bin string) error {
	s.apiserver = s.command(bin,
		"--etcd-servers="+s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(s.apiPort),
		"--cert-dir="+filepath.Join(s.dir, "certs"),
		"--token-auth-file="+filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://127.0.0.1:"+strconv.Itoa(s.apiPort),
		"--service-account-key-file="+filepath.Join(s.dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(s.dir, "sa.key"),
		// No controller manager runs, so no namespace gets a default ServiceAccount for pods to use.
		"--disable-admission-plugins=ServiceAccount",
		// The kubernetes Service endpoint may not point at loopback.
		"--endpoint-reconciler-type=none",
		"--v=0",
	)
	if err := s.apiserver.start(); err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	return s.waitReady(60 * time.Second)
}

// waitReady polls /readyz until it answers 200.
func (s *APIServer) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	url := "https://127.0.0.1:" + strconv.Itoa(s.apiPort) + "/readyz"
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s.apiserver.exited() {
			return fmt.Errorf("kube-apiserver exited while starting; logs in %s", s.logFile.Name())
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %v; logs in %s", timeout, s.logFile.Name())
}

// Restart stops kube-apiserver and starts it again on the same port, certificates and etcd, so clients built from
// Config keep working once it is back.
func (s *APIServer) Restart() {
	s.t.Helper()
	s.StopAPIServer()
	s.StartAgain()
}

// StopAPIServer stops kube-apiserver only (etcd keeps the data).
func (s *APIServer) StopAPIServer() {
	s.t.Helper()
	s.apiserver.terminate()
}

// StartAgain starts kube-apiserver after StopAPIServer.
func (s *APIServer) StartAgain() {
	s.t.Helper()
	if err := s.startAPIServer(s.apiserver.cmd.Path); err != nil {
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

func (s *APIServer) stop() {
	s.apiserver.terminate()
	s.etcd.terminate()
	if s.logFile != nil {
		s.logFile.Close()
	}
	if s.t.Failed() {
		if logs, err := os.ReadFile(filepath.Join(s.dir, "components.log")); err == nil && len(logs) > 0 {
			tail := logs[max(0, len(logs)-4000):]
			s.t.Logf("kube-apiserver/etcd log tail:\n%s", tail)
		}
	}
	os.RemoveAll(s.dir)
}

func (s *APIServer) command(bin string, args ...string) *process {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.logFile, s.logFile
	// Die with the test binary even if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return &process{cmd: cmd, done: make(chan struct{})}
}

// process is a started component; done closes when it exits.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *process) start() error {
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate stops the process with SIGTERM, then SIGKILL after 10 s.
func (p *process) terminate() {
	if p == nil || p.cmd.Process == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomToken(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeServiceAccountKey(t testing.TB, path string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	writeFile(t, path, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der})))
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	kc.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*kc, path)
}
