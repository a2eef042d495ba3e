package publish

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/shim/network"
)

// quantities renders a device capacity's value and policy for comparison
// ("" for an unset one).
func quantities(c resourceapi.DeviceCapacity) [5]string {
	s := func(q interface{ String() string }, set bool) string {
		if !set {
			return ""
		}
		return q.String()
	}
	out := [5]string{c.Value.String()}
	if p := c.RequestPolicy; p != nil {
		out[1] = s(p.Default, p.Default != nil)
		if r := p.ValidRange; r != nil {
			out[2], out[3], out[4] = s(r.Min, r.Min != nil), s(r.Max, r.Max != nil), s(r.Step, r.Step != nil)
		}
	}
	return out
}

func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *bandwidth.Policy
		want   [5]string // value, default, min, max, step
	}{
		{"full policy", &bandwidth.Policy{Capacity: 100e6, Default: 10e6, Min: 1e6, Max: 50e6, Step: 1e6}, [5]string{"100M", "10M", "1M", "50M", "1M"}},
		{"capacity only: min 0, max the capacity, default min", &bandwidth.Policy{Capacity: 1e9, Max: 1e9}, [5]string{"1G", "0", "0", "1G", ""}},
		{"odd values stay exact", &bandwidth.Policy{Capacity: 123456789, Default: 7, Min: 7, Max: 123456789}, [5]string{"123456789", "7", "7", "123456789", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := Capacity(tc.policy)
			c, ok := caps["bandwidth"]
			if !ok || len(caps) != 1 {
				t.Fatalf("capacities %v, want bandwidth only", caps)
			}
			if got := quantities(c); got != tc.want {
				t.Errorf("published %v, want %v", got, tc.want)
			}
			if c.RequestPolicy.ValidValues != nil {
				t.Error("a range policy with validValues too")
			}
		})
	}
	if Capacity(nil) != nil {
		t.Error("a network without bandwidth publishes a capacity")
	}
}

// TestBuildCapacity: a shared device carries its network's bandwidth; a
// slot (one claim each) carries none, nor does a network without one.
func TestBuildCapacity(t *testing.T) {
	with := podNet("with")
	with.Bandwidth = &bandwidth.Policy{Capacity: 100e6, Default: 30e6, Max: 100e6}
	nets := []network.Network{with, podNet("without")}
	devs, _, _ := Build(nets, nil, Shared, 2)
	if c, ok := devs[0].Capacity["bandwidth"]; !ok || c.Value.Value() != 100e6 || c.RequestPolicy.Default.Value() != 30e6 {
		t.Errorf("shared device of a network with bandwidth: capacity %+v", devs[0].Capacity)
	}
	if devs[1].Capacity != nil {
		t.Errorf("shared device of a network without bandwidth: capacity %+v", devs[1].Capacity)
	}
	devs, _, _ = Build(nets, nil, Slots, 2)
	for _, d := range devs {
		if d.Capacity != nil {
			t.Errorf("slot %s carries a capacity", d.Name)
		}
	}
}
