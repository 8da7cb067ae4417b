package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
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

// shellCommands are the commands of a Markdown file's shell blocks, in order (only those under the heading
// section, when not empty): comments dropped, continued lines joined, and a here-document kept with the command
// that opens it.
func shellCommands(t *testing.T, path, section string) []string {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inShell, heredoc, cur := false, "", ""
	inSection := section == ""
	indent := "" // the block's own indentation (inside a list item), which a reader does not type
	for _, raw := range strings.Split(string(doc), "\n") {
		line := strings.TrimSpace(raw)
		if section != "" && strings.HasPrefix(raw, "## ") {
			inSection = raw == section
		}
		switch {
		case !inSection:
			continue
		case !inShell:
			inShell = line == "```sh"
			indent = raw[:len(raw)-len(strings.TrimLeft(raw, " "))]
			continue
		case heredoc != "":
			// A here-document keeps its lines' own indentation.
			cur += "\n" + strings.TrimPrefix(raw, indent)
			if line == heredoc {
				out, cur, heredoc = append(out, cur), "", ""
			}
			continue
		case line == "```":
			inShell = false
			continue
		}
		if i := strings.Index(line, "  #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cur = strings.TrimSpace(cur + " " + line)
		if strings.HasSuffix(cur, `\`) {
			cur = strings.TrimSuffix(cur, `\`)
			continue
		}
		if _, word, ok := strings.Cut(cur, "<<"); ok {
			heredoc = strings.Trim(strings.Fields(word)[0], `'"`)
			continue
		}
		out, cur = append(out, cur), ""
	}
	return out
}

// shellWords splits a command line as the shell would for these commands: on blanks, outside quotes.
func shellWords(line string) []string {
	var words []string
	var word strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, word.String()), false
				word.Reset()
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// repository is where install.md installs from at a tag.
const repository = "https://github.com/gke-disruption-exporter/gke-disruption-exporter"

// TestInstallDocCommands runs install.md's commands, and the README's, as written, in order, against a real API server, as far as
// they can run here: `kubectl apply -k` from the repository at a tag (the tag's tree is this one's: the overlay
// directory, applied for real), `kubectl apply -k` and `kubectl delete -k` of your overlay (the example overlay),
// `kubectl get`, the credentials script (when htpasswd is installed) and `helm install`. It cannot run what needs
// GKE or Google Cloud: `gcloud` (IAM), and `kubectl port-forward` and `curl` (no kubelet runs the pods of the
// test's API server). `kubectl apply -f` of a release file is TestRelease's. A command it does not know fails it,
// so that a new command in install.md is run or named here.
func TestInstallDocCommands(t *testing.T) {
	t.Run("docs/install.md", func(t *testing.T) { runInstallCommands(t, shellCommands(t, "../docs/install.md", ""), true) })
	t.Run("README.md", func(t *testing.T) {
		runInstallCommands(t, shellCommands(t, "../README.md", "## Install on GKE"), false)
	})
}

// runInstallCommands runs install commands as TestInstallDocCommands says; complete is the whole guide, with every
// step, rather than a summary.
func runInstallCommands(t *testing.T, commands []string, complete bool) {
	c := newCluster(t)
	version := ""
	expand := func(s string) string { return strings.ReplaceAll(s, "$VERSION", version) }
	// overlayDir is the kustomization a `-k` argument names: an overlay of the repository at the tag, or yours.
	overlayDir := func(arg string) string {
		arg = expand(strings.Trim(arg, `"`))
		if arg == "path/to/your-overlay" {
			return "examples/overlay"
		}
		dir, ref, ok := strings.Cut(strings.TrimPrefix(arg, repository+"//deploy/"), "?ref=")
		if !ok || ref != version || !strings.HasPrefix(arg, repository+"//deploy/") {
			t.Fatalf("%s: not an overlay of %s at the release tag %q", arg, repository, version)
		}
		return dir
	}
	var credentials []string
	ran := map[string]bool{}
	for _, line := range commands {
		words := shellWords(line)
		switch {
		case strings.HasPrefix(line, "VERSION="):
			version = strings.TrimPrefix(words[0], "VERSION=")
		case strings.HasPrefix(line, "kubectl apply -k "):
			for _, u := range build(t, overlayDir(words[3])) {
				c.apply(t, u, false)
			}
			ran["apply -k"] = true
		case strings.HasPrefix(line, "kubectl delete -k "):
			for _, u := range build(t, overlayDir(words[3])) {
				c.delete(t, u)
			}
			ran["delete -k"] = true
		case strings.HasPrefix(line, "kubectl apply -f "):
			file := expand(strings.Trim(words[3], `"`))
			name, ok := strings.CutPrefix(file, repository+"/releases/download/"+version+"/install-")
			if _, err := os.Stat(filepath.Join("overlays", strings.TrimSuffix(name, ".yaml"))); !ok || err != nil {
				t.Errorf("%s: names no release file of an overlay", line)
			}
		case strings.HasPrefix(line, "kubectl -n gke-disruption-exporter port-forward "), strings.HasPrefix(line, "curl "),
			strings.HasPrefix(line, "gcloud "), strings.HasPrefix(line, "PROJECT_ID="), strings.HasPrefix(line, "PROJECT_NUMBER="):
			t.Logf("not run here (needs GKE or Google Cloud): %s", line)
		case strings.HasPrefix(line, "kubectl "):
			args := words[1:]
			get := slices.Index(args, "get")
			if get < 0 {
				t.Fatalf("a kubectl command this test does not know: %s", line)
			}
			// kubectl's global flags before the verb go after it for the get command alone.
			kubectlGet(t, c.api.Kubeconfig, append(slices.Clone(args[get+1:]), args[:get]...))
			ran["get"] = true
		case strings.HasPrefix(line, "AM_PASSWORD="), strings.HasPrefix(line, "printf "), strings.HasPrefix(line, "cat > web-config.yml"):
			credentials = append(credentials, line)
		case strings.HasPrefix(line, "helm install "):
			// On an API server of its own: the chart would not adopt the objects kubectl applied.
			hc := newCluster(t)
			chart := filepath.Join(testenv.RepoRoot(), words[3])
			helm(t, append(append([]string{"install", words[2], chart}, words[4:]...), "--kubeconfig", hc.api.Kubeconfig)...)
			ran["helm install"] = true
		default:
			t.Errorf("a command this test does not know: %s", line)
		}
	}
	if !ran["apply -k"] || !ran["helm install"] {
		t.Errorf("no kubectl apply -k or helm install command any more: %q", commands)
	}
	if !complete {
		return
	}
	for _, want := range []string{"delete -k", "get"} {
		if !ran[want] {
			t.Errorf("install.md has no %s command any more", want)
		}
	}
	if len(credentials) != 3 {
		t.Fatalf("install.md's credentials step: %q", credentials)
	}
	if _, err := exec.LookPath("htpasswd"); err != nil {
		t.Logf("credentials step not run: htpasswd is not installed here")
		return
	}
	dir := t.TempDir()
	script := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(credentials, "\n"))
	script.Dir = dir
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("credentials step: %v\n%s", err, out)
	}
	users := checkWebConfig(t, string(readFile(t, filepath.Join(dir, "web-config.yml"))))
	if err := bcrypt.CompareHashAndPassword([]byte(users["prometheus"]), readFile(t, filepath.Join(dir, "prometheus-password"))); err != nil {
		t.Errorf("the web config does not accept prometheus-password: %v", err)
	}
}
