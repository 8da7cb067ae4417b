// Package kube loads the client configuration every command that talks to the API server uses.
package kube

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config returns the API server configuration: the given kubeconfig file when set, else the in-cluster service
// account, else $KUBECONFIG (and ~/.kube/config) through clientcmd's loading rules.
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return preferProtobuf(cfg), nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return preferProtobuf(cfg), nil
}

// preferProtobuf asks the API server for protobuf, as Kubernetes' own controllers do: a 65,000-node watch decodes
// several times faster, with a fraction of the garbage JSON leaves. JSON stays accepted (custom resources).
func preferProtobuf(cfg *rest.Config) *rest.Config {
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}
