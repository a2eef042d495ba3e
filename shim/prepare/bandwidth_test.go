package prepare

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func consumed(res resourceapi.DeviceRequestAllocationResult, q string) resourceapi.DeviceRequestAllocationResult {
	res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"bandwidth": resource.MustParse(q)}
	return res
}

func TestAllocated(t *testing.T) {
	base := result("net", "netclass.dev", "blue-dev")
	other := base
	other.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}
	for _, tc := range []struct {
		name string
		res  resourceapi.DeviceRequestAllocationResult
		want int64
	}{
		{"none consumed", base, 0},
		{"another capacity", other, 0},
		{"30M", consumed(base, "30M"), 30_000_000},
		{"binary suffix", consumed(base, "1Gi"), 1 << 30},
		{"fraction rounded up to a whole bit", consumed(base, "1500m"), 2},
		{"zero", consumed(base, "0"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Allocated(tc.res); got != tc.want {
				t.Errorf("Allocated = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPrepareEnforcesTheAllocation: the bandwidth a claim was allocated is
// recorded, caps the egress of the rendered config and of the qos the agent
// keeps (the tighter limit wins over the claim's own), and ingress is left alone.
func TestPrepareEnforcesTheAllocation(t *testing.T) {
	h := newHarness(t)
	plain := claim("default", "c1", "uid-1", consumed(result("net", "netclass.dev", "blue-dev"), "30M"))
	tighter := claim("default", "c2", "uid-2", consumed(result("net", "netclass.dev", "blue-dev"), "30M"))
	tighter.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, nil, `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","qos":{"egressRate":10000000,"egressBurst":100000,"ingressRate":50000000,"ingressBurst":500000}}`),
	}
	looser := claim("default", "c3", "uid-3", consumed(result("net", "netclass.dev", "blue-dev"), "30M"))
	looser.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, nil, `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","qos":{"egressRate":90000000,"egressBurst":100000}}`),
	}
	got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{plain, tighter, looser})
	for _, tc := range []struct {
		uid         string
		rate, burst int64
		ingress     int64
		confHas     string
		allocated   int64
	}{
		{uid: "uid-1", rate: 30_000_000, burst: 300_000, confHas: `"egressRate":30000000,"egressBurst":300000`, allocated: 30_000_000},
		{uid: "uid-2", rate: 10_000_000, burst: 100_000, ingress: 50_000_000, confHas: `"egressRate":10000000`, allocated: 30_000_000},
		{uid: "uid-3", rate: 30_000_000, burst: 100_000, confHas: `"egressRate":30000000,"egressBurst":100000`, allocated: 30_000_000},
	} {
		if err := got[types.UID(tc.uid)].Err; err != nil {
			t.Fatalf("%s: %v", tc.uid, err)
		}
		rec, _ := h.store.Get(types.UID(tc.uid))
		d := rec.Devices[0]
		if d.Bandwidth != tc.allocated {
			t.Errorf("%s: recorded allocation %d, want %d", tc.uid, d.Bandwidth, tc.allocated)
		}
		if b := d.QoS.Base; b == nil || b.EgressRate != tc.rate || b.EgressBurst != tc.burst || b.IngressRate != tc.ingress {
			t.Errorf("%s: qos %+v, want egress %d/%d, ingress %d", tc.uid, d.QoS.Base, tc.rate, tc.burst, tc.ingress)
		}
		if !strings.Contains(string(d.ConfList), tc.confHas) {
			t.Errorf("%s: conflist %s lacks %s", tc.uid, d.ConfList, tc.confHas)
		}
	}
}
