package usage_test

import (
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/usage"
)

func TestClaimNetworks(t *testing.T) {
	devices := usage.SliceDevices([]*resourceapi.ResourceSlice{
		harness.Slice("netclass.dev", "node-a",
			harness.Device("blue-dev", map[string]string{"resource.kubernetes.io/podNetwork": "blue", "resource.kubernetes.io/networkClass": "netclass"}),
			harness.Device("seed004-dev", map[string]string{"netclass.dev/podNetwork": "green"}),
			harness.Device("tenant-dev", map[string]string{"resource.kubernetes.io/podNetwork": "red", "resource.kubernetes.io/podNetworkNamespace": "tenant"}),
		),
		harness.Slice("foreign.example.com", "node-a", harness.Device("blue-dev", map[string]string{"resource.kubernetes.io/podNetwork": "foreign"})),
	})
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  []string
	}{
		{name: "unallocated", claim: harness.Claim("c", nil, nil)},
		{name: "by slice attribute", claim: harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "blue-dev")}, nil), want: []string{"/blue"}},
		{name: "seed 004 attribute", claim: harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "seed004-dev")}, nil), want: []string{"/green"}},
		{name: "namespaced network", claim: harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "tenant-dev")}, nil), want: []string{"tenant/red"}},
		{name: "foreign driver ignored", claim: harness.Claim("c", []harness.Result{harness.Alloc("foreign.example.com", "node-a", "blue-dev")}, nil)},
		{
			name: "status data, device gone from the slice",
			claim: harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "gone"), harness.Alloc("foreign.example.com", "node-a", "x")}, []resourceapi.AllocatedDeviceStatus{
				{Driver: "netclass.dev", Pool: "node-a", Device: "gone", Data: harness.Data(`{"podNetwork":"purple","networkClass":"netclass"}`)},
				{Driver: "foreign.example.com", Pool: "node-a", Device: "x", Data: harness.Data(`{"podNetwork":"foreign"}`)},
			}),
			want: []string{"/purple"},
		},
		{
			name: "status of a device not allocated is ignored",
			claim: harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "blue-dev")}, []resourceapi.AllocatedDeviceStatus{
				{Driver: "netclass.dev", Pool: "node-b", Device: "other", Data: harness.Data(`{"podNetwork":"purple"}`)},
			}),
			want: []string{"/blue"},
		},
		{
			name: "status data of a namespaced network",
			claim: harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "gone")}, []resourceapi.AllocatedDeviceStatus{
				{Driver: "netclass.dev", Pool: "node-a", Device: "gone", Data: harness.Data(`{"podNetwork":"red","podNetworkNamespace":"tenant"}`)},
			}),
			want: []string{"tenant/red"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, n := range usage.ClaimNetworks(tc.claim, devices) {
				got = append(got, n.String())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	users := usage.Users([]*resourceapi.ResourceClaim{
		harness.Claim("z", []harness.Result{harness.Alloc("netclass.dev", "node-a", "blue-dev")}, nil),
		harness.Claim("a", []harness.Result{harness.Alloc("netclass.dev", "node-a", "blue-dev"), harness.Alloc("netclass.dev", "node-a", "seed004-dev")}, nil),
	}, devices)
	if got := strings.Join(users[usage.Network{Name: "blue"}], ","); got != "ns/a,ns/z" {
		t.Errorf("users of blue = %s", got)
	}
	if got := strings.Join(users[usage.Network{Name: "green"}], ","); got != "ns/a" {
		t.Errorf("users of green = %s", got)
	}
}

func TestInUse(t *testing.T) {
	if inUse, msg := usage.InUse(nil, false); inUse || !strings.Contains(msg, "no ResourceClaim") {
		t.Errorf("no users: %v %q", inUse, msg)
	}
	inUse, msg := usage.InUse([]string{"a/1", "a/2", "b/3", "b/4", "c/5", "c/6", "c/7"}, true)
	if !inUse {
		t.Fatalf("users: not in use (%q)", msg)
	}
	for _, want := range []string{"used by 7", "a/1", "c/5", "and 2 more", "deletion waits"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "c/6") {
		t.Errorf("message %q lists more than five claims", msg)
	}
	// Claims come and go without changing the message of a network not being deleted.
	_, one := usage.InUse([]string{"a/1"}, false)
	if _, two := usage.InUse([]string{"a/1", "b/2"}, false); one != two || strings.Contains(one, "a/1") {
		t.Errorf("messages %q and %q: differ, or name a claim", one, two)
	}
}

// A reconciler queues the networks of its kind that changed, or every one
// being deleted when all may have.
func TestRequeue(t *testing.T) {
	gone := metav1.Now()
	nets := []*netclassv1alpha1.Network{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "red", DeletionTimestamp: &gone}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "blue"}},
	}
	var queued []string
	f := usage.Requeue(true, func() []string { return usage.DeletingKeys(nets) }, func(k string) { queued = append(queued, k) })
	f([]string{"storage", "t2/vx"})
	f(nil)
	if !slices.Equal(queued, []string{"t2/vx", "t1/red"}) {
		t.Errorf("queued %v", queued)
	}
	queued = nil
	pns := []*multinetworkv1.PodNetwork{{ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &gone}}}
	f = usage.Requeue(false, func() []string { return usage.DeletingKeys(pns) }, func(k string) { queued = append(queued, k) })
	f([]string{"storage", "t2/vx"})
	f(nil)
	if !slices.Equal(queued, []string{"storage", "old"}) {
		t.Errorf("PodNetworks queued %v", queued)
	}
}

// Each reconciler gets the keys of its own kind from a slice or a claim.
func TestKeysOfOneKind(t *testing.T) {
	s := harness.Slice("netclass.dev", "node-a",
		harness.Device("blue-dev", map[string]string{"resource.kubernetes.io/podNetwork": "blue"}),
		harness.Device("red-dev", map[string]string{"resource.kubernetes.io/podNetwork": "red", "resource.kubernetes.io/podNetworkNamespace": "tenant"}))
	if got := usage.SliceKeys(s, true); !slices.Equal(got, []string{"tenant/red"}) {
		t.Errorf("Networks of the slice: %v", got)
	}
	if got := usage.SliceKeys(s, false); !slices.Equal(got, []string{"blue"}) {
		t.Errorf("PodNetworks of the slice: %v", got)
	}
	devices := func() usage.Devices { return usage.SliceDevices([]*resourceapi.ResourceSlice{s}) }
	c := harness.Claim("c", []harness.Result{harness.Alloc("netclass.dev", "node-a", "blue-dev"), harness.Alloc("netclass.dev", "node-a", "red-dev")}, nil)
	if got, claim := usage.ClaimKeys(c, devices, true); claim != c || !slices.Equal(got, []string{"tenant/red"}) {
		t.Errorf("Networks of the claim: %v", got)
	}
	if got, claim := usage.ClaimKeys("not a claim", devices, false); claim != nil || got != nil {
		t.Errorf("not a claim: %v", got)
	}
}
