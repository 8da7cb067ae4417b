package cli

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/config"
)

// DefaultActionsDeployment is the actions service's Deployment as deploy/base installs it (namespace/name).
const DefaultActionsDeployment = "gke-disruption-exporter/gke-disruption-exporter-actions"

// Policy is the actions policy status reports budgets against, and where it was read.
type Policy struct {
	Config *config.Config
	// DryRunFlag is the actions service's --dry-run (from its Deployment's arguments); the file's dryRun is in Config.
	DryRunFlag bool
	Source     string
}

// DryRun reports whether the actions service runs this policy without changing anything.
func (p *Policy) DryRun() bool { return p.DryRunFlag || p.Config.DryRun }

// loadPolicyFile reads a local policy file with the actions command's parser; a bad file is exit 2.
func loadPolicyFile(path string) (*Policy, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, &ExitError{Code: ExitAPI, Err: errors.New(oneLine(err.Error()))}
	}
	return &Policy{Config: cfg, Source: "file " + path}, nil
}

func (o StatusOptions) actionsDeployment() string {
	if o.ActionsDeployment == "" {
		return DefaultActionsDeployment
	}
	return o.ActionsDeployment
}

func (o StatusOptions) actionsLease() string {
	if o.ActionsLease == "" {
		return DefaultActionsLease
	}
	return o.ActionsLease
}

// checkDeploymentRef refuses an --actions.deployment that is not namespace/name.
func checkDeploymentRef(ref string) error {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("bad --actions.deployment %q: want NAMESPACE/NAME", ref)}
	}
	return nil
}

// discoverPolicy follows the actions Deployment's --config.file argument to the ConfigMap that holds it, mounted as a
// volume or a projected volume's source (its name carries a content hash, so it is never guessed), and parses it
// with the actions command's parser.
func discoverPolicy(ctx context.Context, client kubernetes.Interface, ref string) (*Policy, error) {
	ns, name, _ := strings.Cut(ref, "/")
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, apiError("reading Deployment "+ref, err)
	}
	pod := d.Spec.Template.Spec
	for _, c := range pod.Containers {
		file, dryRun, ok := policyArgs(append(append([]string{}, c.Command...), c.Args...))
		if !ok {
			continue
		}
		cmName, key, err := configMapOf(pod, c, file)
		if err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", ref, err)
		}
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			return nil, apiError("reading ConfigMap "+ns+"/"+cmName, err)
		}
		where := fmt.Sprintf("ConfigMap %s/%s key %s", ns, cmName, key)
		data, ok := cm.Data[key]
		if !ok {
			bin, ok := cm.BinaryData[key]
			if !ok {
				return nil, fmt.Errorf("%s: no such key", where)
			}
			data = string(bin)
		}
		cfg, err := config.Parse([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("policy in %s: %w", where, err)
		}
		return &Policy{Config: cfg, DryRunFlag: dryRun, Source: where + " (Deployment " + ref + ")"}, nil
	}
	return nil, fmt.Errorf("Deployment %s: no container is given --config.file", ref)
}

// policyArgs reads the actions command's --config.file and --dry-run from a container's command line, as kingpin
// parses them (--flag=value or --flag value; --dry-run, --dry-run=false, --no-dry-run; the last one wins).
func policyArgs(args []string) (file string, dryRun, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config.file" && i+1 < len(args):
			file, ok = args[i+1], true
			i++
		case strings.HasPrefix(a, "--config.file="):
			file, ok = strings.TrimPrefix(a, "--config.file="), true
		case a == "--dry-run" || a == "--dry-run=true":
			dryRun = true
		case a == "--no-dry-run" || a == "--dry-run=false":
			dryRun = false
		}
	}
	return file, dryRun, ok && file != ""
}

// configMapOf finds the ConfigMap and key that the container sees at file, through its volume mounts.
func configMapOf(pod corev1.PodSpec, c corev1.Container, file string) (name, key string, err error) {
	file = path.Clean(file)
	var mount *corev1.VolumeMount
	var rel string
	for i, m := range c.VolumeMounts {
		dir := path.Clean(m.MountPath)
		r, ok := "", file == dir
		if !ok {
			r, ok = strings.CutPrefix(file, strings.TrimSuffix(dir, "/")+"/")
		}
		if ok && (mount == nil || len(dir) > len(path.Clean(mount.MountPath))) {
			mount, rel = &c.VolumeMounts[i], r
		}
	}
	if mount == nil {
		return "", "", fmt.Errorf("the policy file %s is on no volume of container %s", file, c.Name)
	}
	inVolume := path.Join(mount.SubPath, rel)
	for _, v := range pod.Volumes {
		if v.Name != mount.Name {
			continue
		}
		switch {
		case v.ConfigMap != nil:
			key, ok, err := keyOf(v.ConfigMap.Name, v.ConfigMap.Items, file, inVolume)
			switch {
			case err != nil:
				return "", "", err
			case !ok:
				return "", "", fmt.Errorf("the policy file %s is no item of ConfigMap %s", file, v.ConfigMap.Name)
			}
			return v.ConfigMap.Name, key, nil
		case v.Projected != nil:
			return projectedConfigMapOf(v.Projected, file, inVolume)
		}
		return "", "", fmt.Errorf("the policy file %s is on volume %s, which is not a ConfigMap", file, v.Name)
	}
	return "", "", fmt.Errorf("container %s mounts volume %s, which the pod does not have", c.Name, mount.Name)
}

// keyOf is the key of ConfigMap name that a volume with items shows as file (inVolume in the volume); ok is false
// when no item is there. Without items every key is a file at the volume's top.
func keyOf(name string, items []corev1.KeyToPath, file, inVolume string) (key string, ok bool, err error) {
	if len(items) == 0 {
		if strings.Contains(inVolume, "/") || inVolume == "." {
			return "", false, fmt.Errorf("the policy file %s is no key of ConfigMap %s", file, name)
		}
		return inVolume, true, nil
	}
	for _, item := range items {
		if path.Clean(item.Path) == inVolume {
			return item.Key, true, nil
		}
	}
	return "", false, nil
}

// projectedConfigMapOf finds the ConfigMap source of a projected volume that shows inVolume: one whose items name
// it, else the one ConfigMap projected whole (with two, which holds the key is not known without reading both).
func projectedConfigMapOf(v *corev1.ProjectedVolumeSource, file, inVolume string) (name, key string, err error) {
	var whole []string
	for _, src := range v.Sources {
		cm := src.ConfigMap
		if cm == nil {
			continue
		}
		if len(cm.Items) == 0 {
			whole = append(whole, cm.Name)
			continue
		}
		if key, ok, _ := keyOf(cm.Name, cm.Items, file, inVolume); ok {
			return cm.Name, key, nil
		}
	}
	switch len(whole) {
	case 0:
		return "", "", fmt.Errorf("the policy file %s is no item of a ConfigMap in its projected volume", file)
	case 1:
		key, _, err := keyOf(whole[0], nil, file, inVolume)
		if err != nil {
			return "", "", err
		}
		return whole[0], key, nil
	}
	return "", "", fmt.Errorf("the policy file %s may be in any of ConfigMaps %s of its projected volume", file, strings.Join(whole, ", "))
}

// oneLine joins a multi-line message into one line for stderr or a header.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
