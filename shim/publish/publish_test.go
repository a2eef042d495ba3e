package publish

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

func podNet(name string) network.Network {
	return network.Network{
		Ref:  attachment.NetworkRef{Class: "netclass", Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "PodNetwork", Name: name},
		Type: "netclass-bridge",
	}
}

func TestDeviceName(t *testing.T) {
	refs := []attachment.NetworkRef{
		{Class: "netclass", Kind: "PodNetwork", Name: "blue"},
		{Class: "other", Kind: "PodNetwork", Name: "blue"},
		{Class: "nets", Kind: "Network", Namespace: "a", Name: "b-c"},
		{Class: "nets", Kind: "Network", Namespace: "a-b", Name: "c"},
		{Class: "netclass", Kind: "PodNetwork", Name: "dotted.name.example"},
		{Class: "netclass", Kind: "PodNetwork", Name: strings.Repeat("x", 253)},
		{Class: "netclass", Kind: "PodNetwork", Name: "1-starts-with-digit"},
		{Class: "netclass", Kind: "PodNetwork", Name: "---"},
	}
	seen := map[string]attachment.NetworkRef{}
	for _, r := range refs {
		name := DeviceName(r)
		for _, n := range []string{name, SlotName(name, 9999), VFName(name, VF{Index: 65535}), VFName(name, VF{Addr: "0000:03:00.2", Index: -1})} {
			if errs := validation.IsDNS1123Label(n); len(errs) != 0 {
				t.Errorf("device name %q of %v is not a DNS label: %v", n, r, errs)
			}
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("%v and %v share device name %q", prev, r, name)
		}
		seen[name] = r
		if DeviceName(r) != name {
			t.Errorf("device name of %v is not stable", r)
		}
	}
	if got := DeviceName(refs[0]); !strings.HasPrefix(got, "blue-") {
		t.Errorf("device name %q does not start with the network's name", got)
	}
}

func TestAttributes(t *testing.T) {
	n := network.Network{
		Ref:  attachment.NetworkRef{Class: "nets", Kind: "Network", Namespace: "tenant-a", Name: "red"},
		Type: "netclass-vxlan", ClusterNetwork: "overlay", VNI: 100, Master: "eth1",
	}
	attrs := Attributes(n)
	want := map[resourceapi.QualifiedName]string{
		"resource.kubernetes.io/podNetwork":          "red",
		"resource.kubernetes.io/podNetworkNamespace": "tenant-a",
		"resource.kubernetes.io/networkClass":        "nets",
		"netclass.dev/podNetwork":                    "red",
		"netclass.dev/type":                          "netclass-vxlan",
		"netclass.dev/kind":                          "Network",
		"netclass.dev/clusterNetwork":                "overlay",
		"netclass.dev/master":                        "eth1",
	}
	for k, v := range want {
		if a, ok := attrs[k]; !ok || a.StringValue == nil || *a.StringValue != v {
			t.Errorf("attribute %s = %+v, want %q", k, a, v)
		}
	}
	if a := attrs["netclass.dev/vni"]; a.IntValue == nil || *a.IntValue != 100 {
		t.Errorf("vni attribute = %+v", a)
	}
	if _, ok := attrs["netclass.dev/vlanId"]; ok {
		t.Error("a vxlan network has a vlanId attribute")
	}
	if len(attrs) != len(want)+1 {
		t.Errorf("%d attributes, want %d: %v", len(attrs), len(want)+1, attrs)
	}
	cluster := Attributes(podNet("blue"))
	if _, ok := cluster["resource.kubernetes.io/podNetworkNamespace"]; ok {
		t.Error("a cluster-scoped network has a podNetworkNamespace attribute")
	}
}

func TestBuild(t *testing.T) {
	nets := []network.Network{podNet("a"), podNet("b")}
	devs, table, _ := Build(nets, nil, Shared, 4)
	if len(devs) != 2 || len(table) != 2 {
		t.Fatalf("shared: %d devices, %d table entries", len(devs), len(table))
	}
	for _, d := range devs {
		if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
			t.Errorf("shared device %s does not allow multiple allocations", d.Name)
		}
		if table[d.Name].Network.Ref.Name == "" {
			t.Errorf("device %s not in the table", d.Name)
		}
	}
	devs, table, _ = Build(nets, nil, Slots, 4)
	if len(devs) != 8 || len(table) != 8 {
		t.Fatalf("slots: %d devices, %d table entries", len(devs), len(table))
	}
	for _, d := range devs {
		if d.AllowMultipleAllocations != nil {
			t.Errorf("slot device %s sets allowMultipleAllocations", d.Name)
		}
	}
	if table[SlotName(DeviceName(nets[1].Ref), 3)].Network.Ref.Name != "b" {
		t.Error("slot 3 of b does not resolve to b")
	}
}

func TestSlices(t *testing.T) {
	for _, tc := range []struct{ devices, perSlice, want int }{
		{0, 128, 1}, {1, 128, 1}, {128, 128, 1}, {129, 128, 2}, {500, 128, 4}, {500, 0, 4}, {500, 1000, 4}, {10, 3, 4},
	} {
		devs := make([]resourceapi.Device, tc.devices)
		for i := range devs {
			devs[i].Name = fmt.Sprintf("d%d", i)
		}
		slices := Slices(devs, tc.perSlice)
		if len(slices) != tc.want {
			t.Errorf("%d devices by %d: %d slices, want %d", tc.devices, tc.perSlice, len(slices), tc.want)
			continue
		}
		total := 0
		for i, s := range slices {
			if len(s.Devices) > MaxDevicesPerSlice {
				t.Errorf("slice %d has %d devices", i, len(s.Devices))
			}
			for j, d := range s.Devices {
				if d.Name != fmt.Sprintf("d%d", total+j) {
					t.Errorf("slice %d device %d is %s: order not kept", i, j, d.Name)
				}
			}
			total += len(s.Devices)
		}
		if total != tc.devices {
			t.Errorf("%d devices in slices, want %d", total, tc.devices)
		}
	}
}

type fakeSource struct {
	mu   sync.Mutex
	nets []network.Network
}

func (f *fakeSource) set(nets ...network.Network) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nets = nets
}

func (f *fakeSource) Collect() ([]network.Network, []network.Skip, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]network.Network(nil), f.nets...), []network.Skip{{Ref: podNet("off").Ref, Reason: "x"}}, nil
}

type fakeSink struct {
	mu    sync.Mutex
	calls []resourceslice.DriverResources
}

func (f *fakeSink) PublishResources(_ context.Context, r resourceslice.DriverResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r)
	return nil
}

func (f *fakeSink) last() (int, []resourceslice.Slice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return 0, nil
	}
	return len(f.calls), f.calls[len(f.calls)-1].Pools["node1"].Slices
}

func TestPublisherRun(t *testing.T) {
	src := &fakeSource{}
	src.set(podNet("a"))
	sink := &fakeSink{}
	p := New(src, Options{Pool: "node1", Debounce: time.Millisecond, Resync: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := p.Published()
	go p.Run(ctx, sink)
	waitClosed(t, first)
	if _, ok := p.Lookup(DeviceName(podNet("a").Ref)); !ok {
		t.Fatal("device of a not looked up after the first publication")
	}

	src.set(podNet("a"), podNet("b"))
	next := p.Published()
	p.Trigger()
	waitClosed(t, next)
	_, slices := sink.last()
	if len(slices) != 1 || len(slices[0].Devices) != 2 {
		t.Fatalf("after the trigger: slices %+v", slices)
	}

	// The API server drops allowMultipleAllocations: fall back to slots.
	shared := true
	desired := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "x", AllowMultipleAllocations: &shared}}}}
	actual := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "x"}}}}
	next = p.Published()
	if p.HandleError(ctx, fmt.Errorf("wrapped: %w", &resourceslice.DroppedFieldsError{DesiredSlice: desired, ActualSlice: actual})) != true {
		t.Fatal("dropped allowMultipleAllocations not handled")
	}
	waitClosed(t, next)
	if p.Mode() != Slots {
		t.Fatalf("mode %s after the drop", p.Mode())
	}
	_, slices = sink.last()
	if n := len(slices[0].Devices); n != 32 {
		t.Fatalf("slots mode publishes %d devices, want 2×16", n)
	}
	if p.HandleError(ctx, fmt.Errorf("some other error")) {
		t.Fatal("an unrelated error was handled")
	}
	other := &resourceslice.DroppedFieldsError{DesiredSlice: actual, ActualSlice: actual}
	if p.HandleError(ctx, other) {
		t.Fatal("a drop of other fields was taken for allowMultipleAllocations")
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no publication within 10 s")
	}
}

func TestBuildSRIOV(t *testing.T) {
	pool := network.Network{Ref: attachment.NetworkRef{Class: "c", Kind: "PodNetwork", Name: "fast"}, Type: "netclass-sriov", Master: "pf0"}
	fixed := network.Network{Ref: attachment.NetworkRef{Class: "c", Kind: "PodNetwork", Name: "pinned"}, Type: "netclass-sriov", Master: "pf0", DeviceID: "0000:03:00.3"}
	lone := network.Network{Ref: attachment.NetworkRef{Class: "c", Kind: "PodNetwork", Name: "lone"}, Type: "netclass-sriov", DeviceID: "0000:04:00.1"}
	vfs := map[string][]VF{"pf0": {{Addr: "0000:03:00.2", Index: 0}, {Addr: "0000:03:00.3", Index: 1}}}
	for _, mode := range []Mode{Shared, Slots} {
		devs, table, _ := Build([]network.Network{pool, fixed, lone}, vfs, mode, 4)
		if len(devs) != 4 {
			t.Fatalf("%s: %d devices, want 2 VFs + the pinned VF + the lone VF", mode, len(devs))
		}
		for _, d := range devs {
			if d.AllowMultipleAllocations != nil {
				t.Errorf("VF device %s is shareable", d.Name)
			}
			pci := d.Attributes[AttributePCIAddress]
			if pci.StringValue == nil || table[d.Name].DeviceID != *pci.StringValue {
				t.Errorf("device %s: pciAddress %v, offer %+v", d.Name, pci, table[d.Name])
			}
		}
		if o := table[VFName(DeviceName(pool.Ref), VF{Index: 1})]; o.DeviceID != "0000:03:00.3" || o.Network.Ref.Name != "fast" {
			t.Errorf("%s: VF 1 of fast is %+v", mode, o)
		}
		if o := table[VFName(DeviceName(fixed.Ref), VF{Index: 1})]; o.DeviceID != "0000:03:00.3" {
			t.Errorf("%s: the pinned network does not offer its VF by index: %v", mode, table)
		}
	}
	devs, _, _ := Build([]network.Network{pool}, nil, Shared, 4)
	if len(devs) != 0 {
		t.Errorf("an SR-IOV network without known VFs publishes %d devices", len(devs))
	}
}

type fakeVFs map[string][]VF

func (f fakeVFs) VFs(pf string) ([]VF, error) {
	if v, ok := f[pf]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no PF %q", pf)
}

func TestPublisherListsVFs(t *testing.T) {
	src := &fakeSource{}
	src.set(network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "fast"}, Type: "netclass-sriov", Master: "pf0"},
		network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "gone"}, Type: "netclass-sriov", Master: "pf9"})
	sink := &fakeSink{}
	p := New(src, Options{Pool: "node1", VFs: fakeVFs{"pf0": {{Addr: "0000:03:00.2", Index: 0}}}})
	if err := p.Sync(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	_, slices := sink.last()
	if len(slices[0].Devices) != 1 {
		t.Fatalf("devices %+v", slices[0].Devices)
	}
	if o, ok := p.Lookup(slices[0].Devices[0].Name); !ok || o.DeviceID != "0000:03:00.2" {
		t.Fatalf("lookup %+v %v", o, ok)
	}
}

// TestDeviceNamesNeverCollide: thousands of references whose readable parts
// are the same (long shared prefixes, cut at the readable length) still get
// distinct, valid names, with room for every suffix, and at least 64 bits of hash.
func TestDeviceNamesNeverCollide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prefix := strings.Repeat("tenant-with-a-very-long-name", 3)
	seen := map[string]attachment.NetworkRef{}
	for i := range 20000 {
		r := attachment.NetworkRef{Class: "netclass", Kind: "Network",
			Namespace: prefix + strconv.Itoa(rng.IntN(50)), Name: prefix + "-net-" + strconv.FormatUint(rng.Uint64(), 36)}
		if i%3 == 0 {
			r.Kind, r.Namespace = "PodNetwork", ""
		}
		name := DeviceName(r)
		if prev, dup := seen[name]; dup && prev != r {
			t.Fatalf("%v and %v share device name %q", prev, r, name)
		}
		seen[name] = r
		hash := name[strings.LastIndex(name, "-")+1:]
		if len(hash) < 16 {
			t.Fatalf("device name %q carries a %d-bit hash", name, 4*len(hash))
		}
		for _, n := range []string{name, SlotName(name, 9999), VFName(name, VF{Index: 65535}), VFName(name, VF{Addr: "0000:03:00.2", Index: -1})} {
			if errs := validation.IsDNS1123Label(n); len(errs) != 0 {
				t.Fatalf("device name %q of %v is not a DNS label: %v", n, r, errs)
			}
		}
	}
}

// TestBuildDropsDuplicates: the same network twice (or any two with one
// name) gives one device and a skip naming both, never an invalid pool.
func TestBuildDropsDuplicates(t *testing.T) {
	for _, mode := range []Mode{Shared, Slots} {
		devs, table, skips := Build([]network.Network{podNet("a"), podNet("b"), podNet("a")}, nil, mode, 2)
		names := map[string]bool{}
		for _, d := range devs {
			if names[d.Name] {
				t.Fatalf("%s: device %s published twice", mode, d.Name)
			}
			names[d.Name] = true
		}
		perNet := map[Mode]int{Shared: 1, Slots: 2}[mode]
		if len(devs) != 2*perNet || len(table) != 2*perNet || len(skips) != perNet {
			t.Fatalf("%s: %d devices, %d table entries, skips %v", mode, len(devs), len(table), skips)
		}
		if skips[0].Reason != ReasonDuplicateDevice || !strings.Contains(skips[0].Message, "PodNetwork a") {
			t.Errorf("%s: skip %+v", mode, skips[0])
		}
	}
}

// Changed is called after the publications that change what a device
// stands for, and only those: a network's labels are the rule agent's.
func TestPublisherChanged(t *testing.T) {
	src := &fakeSource{}
	a := podNet("a")
	src.set(a)
	calls := 0
	p := New(src, Options{Pool: "node1", Changed: func() { calls++ }})
	if err := p.Prime(context.Background()); err != nil {
		t.Fatal(err)
	}
	relabelled := podNet("a")
	relabelled.Labels = map[string]string{"qos": "gold"}
	for i, step := range []struct {
		nets []network.Network
		want int
	}{
		{nets: []network.Network{a}, want: 0}, // as primed
		{nets: []network.Network{a}, want: 0},
		{nets: []network.Network{relabelled}, want: 1},
		{nets: []network.Network{relabelled, podNet("b")}, want: 2},
		{nets: []network.Network{relabelled}, want: 3},
		{nets: []network.Network{relabelled}, want: 3},
	} {
		src.set(step.nets...)
		if err := p.Sync(context.Background(), &fakeSink{}); err != nil {
			t.Fatal(err)
		}
		if calls != step.want {
			t.Errorf("step %d: %d calls, want %d", i, calls, step.want)
		}
	}
}
