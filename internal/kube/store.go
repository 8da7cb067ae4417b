package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Codec reads and writes a value kept in a ConfigMap key.
type Codec[T any] struct {
	Decode func(string) (T, error)
	Encode func(T) string
}

// ConfigMapStore keeps one value in one key of a ConfigMap: the actions service's ledgers, next to its Lease.
type ConfigMapStore[T any] struct {
	Client          kubernetes.Interface
	Namespace, Name string
	// Key is the ConfigMap key; What names the value in errors ("the repair ledger").
	Key, What string
	Codec     Codec[T]
	// BeforeWrite is called right before every write; an error stops it (the fence, a dry run).
	BeforeWrite func() error
}

// Read returns the value; a ConfigMap never written holds the zero value.
func (s ConfigMapStore[T]) Read(ctx context.Context) (T, error) {
	v, _, err := s.read(ctx)
	return v, err
}

func (s ConfigMapStore[T]) read(ctx context.Context) (T, *corev1.ConfigMap, error) {
	var zero T
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return zero, nil, nil
	}
	if err != nil {
		return zero, nil, fmt.Errorf("reading %s %s/%s: %w", s.What, s.Namespace, s.Name, err)
	}
	v, err := s.Codec.Decode(cm.Data[s.Key])
	if err != nil {
		return zero, nil, fmt.Errorf("%s/%s: %w", s.Namespace, s.Name, err)
	}
	return v, cm, nil
}

// Update applies change to the value as stored and writes it, conditional on the ConfigMap's resourceVersion (read
// again and changed again on a conflict); change returns false to write nothing. It returns the value as written
// (or as read, when nothing was).
func (s ConfigMapStore[T]) Update(ctx context.Context, change func(*T) bool) (T, error) {
	var out T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, cm, err := s.read(ctx)
		if err != nil {
			return err
		}
		out = v
		if !change(&v) {
			return nil
		}
		if s.BeforeWrite != nil {
			if err := s.BeforeWrite(); err != nil {
				return err
			}
		}
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name,
				Labels: map[string]string{"app.kubernetes.io/name": "gke-disruption-exporter", "app.kubernetes.io/component": "actions"}}}
			cm.Data = map[string]string{s.Key: s.Codec.Encode(v)}
			_, err = s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.Name, err) // created meanwhile: again
			}
		} else {
			cm = cm.DeepCopy()
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[s.Key] = s.Codec.Encode(v)
			_, err = s.Client.CoreV1().ConfigMaps(s.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			out = v
		}
		return err
	})
	return out, err
}
