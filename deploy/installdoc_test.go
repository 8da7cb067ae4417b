package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubectl/pkg/cmd/get"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/internal/testenv"
)

// docCommand returns the first line of a shell block in docs/install.md that starts with prefix.
func docCommand(t *testing.T, prefix string) string {
	t.Helper()
	f, err := os.Open("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("docs/install.md has no command starting with %q", prefix)
	return ""
}

// kubectlGet runs `kubectl get` as kubectl's own code does, against the kubeconfig.
func kubectlGet(t *testing.T, kubeconfig string, args []string) string {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	var out, errOut bytes.Buffer
	cmd := get.NewCmdGet("kubectl", cmdutil.NewFactory(flags), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	flags.AddFlags(cmd.PersistentFlags())
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("kubectl get %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// TestInstallDryRunCheck runs install.md's command for watching the dry run, as written, against a real API server
// with an event the actions service's recorder writes about a node named the way GKE names them
// (gke-<cluster>-<pool>-…), and one another component writes about the same node.
func TestInstallDryRunCheck(t *testing.T) {
	line := docCommand(t, "kubectl get events")
	api := testenv.StartAPIServer(t)
	node, err := api.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gke-prod-a3-gpu-pool-4f2c1a9b-x7kq"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: api.Client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: actions.EventComponent, Host: "actions-0"})
	recorder.Event(node, corev1.EventTypeNormal, "DisruptionActionDryRun", "dry run: would drain: policy")
	kubelet := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: node.Name})
	kubelet.Event(node, corev1.EventTypeNormal, "NodeReady", "Node status is now: NodeReady")

	args := strings.Fields(strings.TrimPrefix(line, "kubectl get "))
	testenv.Eventually(t, 30*time.Second, "the dry-run event listed by: "+line, func() error {
		out := kubectlGet(t, api.Kubeconfig, args)
		if !strings.Contains(out, "DisruptionActionDryRun") || !strings.Contains(out, "node/"+node.Name) {
			return fmt.Errorf("output:\n%s", out)
		}
		if strings.Contains(out, "NodeReady") {
			t.Fatalf("%s lists other components' events:\n%s", line, out)
		}
		return nil
	})
}
