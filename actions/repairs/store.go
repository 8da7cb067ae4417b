package repairs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// DataKey is the ConfigMap key that holds the ledger.
const DataKey = "ledger.json"

// ConfigMapName is the ledger's ConfigMap for the actions instance whose Lease is lease: one ledger per instance,
// in the Lease's namespace.
func ConfigMapName(lease string) string { return lease + "-repairs" }

// Store reads and writes one ledger ConfigMap.
type Store struct {
	Client          kubernetes.Interface
	Namespace, Name string
	// BeforeWrite is called right before every write; an error stops it (the fence, a dry run).
	BeforeWrite func() error
}

// Read returns the ledger; a ledger never written is empty.
func (s Store) Read(ctx context.Context) (Ledger, error) {
	l, _, err := s.read(ctx)
	return l, err
}

func (s Store) read(ctx context.Context) (Ledger, *corev1.ConfigMap, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Ledger{}, nil, nil
	}
	if err != nil {
		return Ledger{}, nil, fmt.Errorf("reading the repair ledger %s/%s: %w", s.Namespace, s.Name, err)
	}
	l, err := Decode(cm.Data[DataKey])
	if err != nil {
		return Ledger{}, nil, fmt.Errorf("%s/%s: %w", s.Namespace, s.Name, err)
	}
	return l, cm, nil
}

// Update applies change to the ledger as stored and writes it, conditional on the ConfigMap's resourceVersion
// (read again and changed again on a conflict); change returns false to write nothing. It returns the ledger as
// written (or as read, when nothing was).
func (s Store) Update(ctx context.Context, change func(*Ledger) bool) (Ledger, error) {
	var out Ledger
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, cm, err := s.read(ctx)
		if err != nil {
			return err
		}
		out = l
		if !change(&l) {
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
			cm.Data = map[string]string{DataKey: l.Encode()}
			_, err = s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), s.Name, err) // created meanwhile: again
			}
		} else {
			cm = cm.DeepCopy()
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[DataKey] = l.Encode()
			_, err = s.Client.CoreV1().ConfigMaps(s.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err == nil {
			out = l
		}
		return err
	})
	return out, err
}
