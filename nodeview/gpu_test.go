package nodeview

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
)

func TestGPUFaults(t *testing.T) {
	since := time.Date(2026, 8, 14, 9, 30, 0, 0, time.UTC)
	xid := func(status corev1.ConditionStatus, reason, bootID string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: gke.ConditionXidCriticalError, Status: status, Reason: reason, Message: bootID,
			LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since.Add(time.Hour))}
	}
	devices := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	for _, tc := range []struct {
		name               string
		bootID             string
		conditions         []corev1.NodeCondition
		capacity, alloc    corev1.ResourceList
		want               *XidCritical
		wantGPUs, wantTPUs int64
		wantUnreadable     []Unreadable
	}{
		{name: "no condition"},
		{
			name: "critical Xid in this boot", bootID: "boot-2",
			conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, xid(corev1.ConditionTrue, `{"79":true,"48":true}`, "boot-2")},
			want:       &XidCritical{Xids: []uint32{48, 79}, Since: since},
		},
		{
			name: "left from before a repair: stale", bootID: "boot-3",
			conditions: []corev1.NodeCondition{xid(corev1.ConditionTrue, `{"79":true}`, "boot-2")},
		},
		{
			name: "stale and unreadable: says nothing, counts nothing", bootID: "boot-3",
			conditions: []corev1.NodeCondition{xid(corev1.ConditionTrue, `garbage`, "boot-2")},
		},
		{
			name: "no boot ID in the condition", bootID: "boot-2",
			conditions: []corev1.NodeCondition{xid(corev1.ConditionTrue, `{"79":true}`, "")},
		},
		{
			// The plugin writes the node's boot ID, and keeps its condition while either is unknown.
			name:       "no boot ID reported: the plugin's empty message matches",
			conditions: []corev1.NodeCondition{xid(corev1.ConditionTrue, `{"79":true}`, "")},
			want:       &XidCritical{Xids: []uint32{79}, Since: since},
		},
		{
			name: "not True", bootID: "boot-2",
			conditions: []corev1.NodeCondition{xid(corev1.ConditionFalse, `{"79":true}`, "boot-2")},
		},
		{
			name: "unreadable reason keeps the fault and its time", bootID: "boot-2",
			conditions:     []corev1.NodeCondition{xid(corev1.ConditionTrue, `79`, "boot-2")},
			want:           &XidCritical{Since: since},
			wantUnreadable: []Unreadable{{UnreadableXidCondition, `79`}},
		},
		{
			name: "a bad key drops only itself", bootID: "boot-2",
			conditions:     []corev1.NodeCondition{xid(corev1.ConditionTrue, `{"79":true,"x":true}`, "boot-2")},
			want:           &XidCritical{Xids: []uint32{79}, Since: since},
			wantUnreadable: []Unreadable{{UnreadableXidCondition, `{"79":true,"x":true}`}},
		},
		{
			name:     "two GPUs unhealthy",
			capacity: devices("cpu", "208", "nvidia.com/gpu", "8"), alloc: devices("cpu", "207", "nvidia.com/gpu", "6"),
			wantGPUs: 2,
		},
		{
			name:     "a TPU chip unhealthy",
			capacity: devices("google.com/tpu", "4"), alloc: devices("google.com/tpu", "3"),
			wantTPUs: 1,
		},
		{
			name:     "all healthy",
			capacity: devices("nvidia.com/gpu", "8"), alloc: devices("nvidia.com/gpu", "8"),
		},
		{
			name:     "allocatable not reported: no guess",
			capacity: devices("nvidia.com/gpu", "8"), alloc: devices("cpu", "1"),
		},
		{
			name:     "allocatable above capacity: none unhealthy",
			capacity: devices("nvidia.com/gpu", "1"), alloc: devices("nvidia.com/gpu", "2"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{
				NodeInfo: corev1.NodeSystemInfo{BootID: tc.bootID}, Conditions: tc.conditions,
				Capacity: tc.capacity, Allocatable: tc.alloc}}
			v := Of(n)
			if !reflect.DeepEqual(v.XidCritical, tc.want) {
				t.Errorf("XidCritical %+v, want %+v", v.XidCritical, tc.want)
			}
			if v.UnhealthyGPUs != tc.wantGPUs || v.UnhealthyTPUs != tc.wantTPUs {
				t.Errorf("unhealthy GPUs %d, TPUs %d; want %d, %d", v.UnhealthyGPUs, v.UnhealthyTPUs, tc.wantGPUs, tc.wantTPUs)
			}
			if !reflect.DeepEqual(v.Unreadable, tc.wantUnreadable) {
				t.Errorf("unreadable %v, want %v", v.Unreadable, tc.wantUnreadable)
			}
			if len(tc.conditions) > 0 && tc.conditions[0].Type == corev1.NodeReady && !v.Ready {
				t.Error("Ready lost")
			}
		})
	}
}

func TestShowsXid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault *XidCritical
		want  bool
	}{
		{"no fault in this boot", nil, false},
		{"the Xid", &XidCritical{Xids: []uint32{48, 79}}, true},
		{"another Xid", &XidCritical{Xids: []uint32{48}}, false},
		{"unreadable Xids: a fault of this boot all the same", &XidCritical{}, true},
	} {
		if got := (&View{XidCritical: tc.fault}).ShowsXid("79"); got != tc.want {
			t.Errorf("%s: ShowsXid = %v, want %v", tc.name, got, tc.want)
		}
	}
}
