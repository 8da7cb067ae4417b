package localenv

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
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
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIServerOptions configure StartAPIServer; zero fields take free loopback ports and a fresh temporary directory.
type APIServerOptions struct {
	// Port is kube-apiserver's secure port.
	Port int
	// EtcdPort and EtcdPeerPort are etcd's client and peer ports.
	EtcdPort, EtcdPeerPort int
}

// APIServer is a real kube-apiserver backed by a real etcd, both on loopback, with a fresh data directory.
type APIServer struct {
	// Config authenticates as a cluster admin (group system:masters).
	Config *rest.Config
	// Client is a clientset for Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file for Config, for binaries.
	Kubeconfig string
	// Dir holds the data, certificates, kubeconfig and the components' log; Stop removes it.
	Dir string
	// LogPath is the file etcd and kube-apiserver log to.
	LogPath string

	apiserverBin string
	apiPort      int
	etcdURL      string
	apiserver    *Process
	etcd         *Process
	logFile      *os.File
}

// StartAPIServer builds (first time only) and starts etcd and kube-apiserver and waits until the API answers. Stop
// ends both and removes Dir; on error everything started is stopped already.
func StartAPIServer(opts APIServerOptions) (_ *APIServer, err error) {
	apiserverBin, err := Tool("kube-apiserver")
	if err != nil {
		return nil, err
	}
	etcdBin, err := Tool("etcd")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "localenv-apiserver-")
	if err != nil {
		return nil, err
	}
	s := &APIServer{Dir: dir, LogPath: filepath.Join(dir, "components.log"), apiserverBin: apiserverBin}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.logFile, err = os.Create(s.LogPath); err != nil {
		return nil, err
	}

	ports, err := freePorts(opts.EtcdPort, opts.EtcdPeerPort, opts.Port)
	if err != nil {
		return nil, err
	}
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.etcd, err = s.start(etcdBin,
		"--name=localenv",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+s.etcdURL,
		"--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=localenv="+peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}

	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := writeServiceAccountKey(filepath.Join(dir, "sa.key")); err != nil {
		return nil, err
	}
	s.apiPort = ports[2]
	if err := s.StartAgain(); err != nil {
		return nil, err
	}

	s.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(s.apiPort),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(dir, "certs", "apiserver.crt")},
		QPS:             1000,
		Burst:           2000,
	}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		return nil, err
	}
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(s.Kubeconfig, s.Config); err != nil {
		return nil, err
	}
	return s, nil
}

// StartAgain starts kube-apiserver (again, after StopAPIServer) on the same port, certificates and etcd, so
// clients built from Config keep working once it is back.
func (s *APIServer) StartAgain() error {
	var err error
	s.apiserver, err = s.start(s.apiserverBin,
		"--etcd-servers="+s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(s.apiPort),
		"--cert-dir="+filepath.Join(s.Dir, "certs"),
		"--token-auth-file="+filepath.Join(s.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://127.0.0.1:"+strconv.Itoa(s.apiPort),
		"--service-account-key-file="+filepath.Join(s.Dir, "sa.key"),
		"--service-account-signing-key-file="+filepath.Join(s.Dir, "sa.key"),
		// No controller manager runs, so no namespace gets a default ServiceAccount for pods to use.
		"--disable-admission-plugins=ServiceAccount",
		// The kubernetes Service endpoint may not point at loopback.
		"--endpoint-reconciler-type=none",
		"--v=0",
	)
	if err != nil {
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
		if s.apiserver.Exited() {
			return fmt.Errorf("kube-apiserver exited while starting; logs in %s", s.LogPath)
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %v; logs in %s", timeout, s.LogPath)
}

// StopAPIServer stops kube-apiserver only (etcd keeps the data).
func (s *APIServer) StopAPIServer() { s.apiserver.Stop(10 * time.Second) }

// Logs returns the end of the components' log, up to max bytes.
func (s *APIServer) Logs(max int) string {
	logs, err := os.ReadFile(s.LogPath)
	if err != nil {
		return ""
	}
	return string(logs[len(logs)-min(len(logs), max):])
}

// Stop ends kube-apiserver and etcd and removes Dir.
func (s *APIServer) Stop() {
	s.apiserver.Stop(10 * time.Second)
	s.etcd.Stop(10 * time.Second)
	if s.logFile != nil {
		s.logFile.Close()
	}
	os.RemoveAll(s.Dir)
}

// start starts one component, logging to the components' log.
func (s *APIServer) start(bin string, args ...string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = s.logFile, s.logFile
	return StartProcess(cmd)
}

// freePorts returns the given ports, replacing zeros by ports free on loopback right now.
func freePorts(ports ...int) ([]int, error) {
	out := make([]int, len(ports))
	for i, p := range ports {
		if p != 0 {
			out[i] = p
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held open until all are picked, so that no two are the same.
		defer l.Close()
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func writeServiceAccountKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localenv"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["localenv"] = &clientcmdapi.Context{Cluster: "localenv", AuthInfo: "admin"}
	kc.CurrentContext = "localenv"
	return clientcmd.WriteToFile(*kc, path)
}

// insecureTLS is for the readiness probe only, which runs before the serving certificate exists.
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // loopback probe
