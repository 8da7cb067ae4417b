package executor

import (
	"context"

	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typedpolicyv1 "k8s.io/client-go/kubernetes/typed/policy/v1"
	typedpolicyv1beta1 "k8s.io/client-go/kubernetes/typed/policy/v1beta1"
)

// fencedClient is the client the drain helper evicts (or deletes) pods with: each eviction and deletion is sent only
// while the fence holds, so a drain that resumes after this replica lost the Lease evicts nothing more.
type fencedClient struct {
	kubernetes.Interface
	check func() error
}

func (c fencedClient) PolicyV1() typedpolicyv1.PolicyV1Interface {
	return fencedPolicyV1{c.Interface.PolicyV1(), c.check}
}

func (c fencedClient) PolicyV1beta1() typedpolicyv1beta1.PolicyV1beta1Interface {
	return fencedPolicyV1beta1{c.Interface.PolicyV1beta1(), c.check}
}

func (c fencedClient) CoreV1() typedcorev1.CoreV1Interface {
	return fencedCoreV1{c.Interface.CoreV1(), c.check}
}

type fencedPolicyV1 struct {
	typedpolicyv1.PolicyV1Interface
	check func() error
}

func (p fencedPolicyV1) Evictions(namespace string) typedpolicyv1.EvictionInterface {
	return fencedEvictionsV1{p.PolicyV1Interface.Evictions(namespace), p.check}
}

type fencedEvictionsV1 struct {
	typedpolicyv1.EvictionInterface
	check func() error
}

func (e fencedEvictionsV1) Evict(ctx context.Context, eviction *policyv1.Eviction) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.EvictionInterface.Evict(ctx, eviction)
}

type fencedPolicyV1beta1 struct {
	typedpolicyv1beta1.PolicyV1beta1Interface
	check func() error
}

func (p fencedPolicyV1beta1) Evictions(namespace string) typedpolicyv1beta1.EvictionInterface {
	return fencedEvictionsV1beta1{p.PolicyV1beta1Interface.Evictions(namespace), p.check}
}

type fencedEvictionsV1beta1 struct {
	typedpolicyv1beta1.EvictionInterface
	check func() error
}

func (e fencedEvictionsV1beta1) Evict(ctx context.Context, eviction *policyv1beta1.Eviction) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.EvictionInterface.Evict(ctx, eviction)
}

type fencedCoreV1 struct {
	typedcorev1.CoreV1Interface
	check func() error
}

func (c fencedCoreV1) Pods(namespace string) typedcorev1.PodInterface {
	return fencedPods{c.CoreV1Interface.Pods(namespace), c.check}
}

type fencedPods struct {
	typedcorev1.PodInterface
	check func() error
}

func (p fencedPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := p.check(); err != nil {
		return err
	}
	return p.PodInterface.Delete(ctx, name, opts)
}
