package conformance

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestAllocatedTo(t *testing.T) {
	adv := []Advertised{{Pool: "node1", Device: "blue-1"}}
	claim := func(results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}}}
	}
	if _, err := AllocatedTo(claim(resourceapi.DeviceRequestAllocationResult{Driver: "d", Pool: "node1", Device: "blue-1"}), "d", adv); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*resourceapi.ResourceClaim{
		"other driver":   claim(resourceapi.DeviceRequestAllocationResult{Driver: "x", Pool: "node1", Device: "blue-1"}),
		"other device":   claim(resourceapi.DeviceRequestAllocationResult{Driver: "d", Pool: "node1", Device: "red-1"}),
		"other pool":     claim(resourceapi.DeviceRequestAllocationResult{Driver: "d", Pool: "node2", Device: "blue-1"}),
		"not allocated":  {},
		"nothing at all": claim(),
	} {
		if _, err := AllocatedTo(c, "d", adv); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestStatusEntryAndNetworkData(t *testing.T) {
	share := types.UID("s1")
	r := resourceapi.DeviceRequestAllocationResult{Driver: "d", Pool: "p", Device: "x", ShareID: &share}
	good := resourceapi.AllocatedDeviceStatus{Driver: "d", Pool: "p", Device: "x", ShareID: ptr.To("s1"),
		NetworkData: &resourceapi.NetworkDeviceData{InterfaceName: "net1", IPs: []string{"10.0.0.2/24"}, HardwareAddress: "02:00:00:00:00:01"}}
	other := good
	other.ShareID = ptr.To("s2")
	c := &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Devices: []resourceapi.AllocatedDeviceStatus{other}}}
	if _, err := StatusEntry(c, r); err == nil {
		t.Fatal("another share's entry was taken")
	}
	c.Status.Devices = append(c.Status.Devices, good)
	e, err := StatusEntry(c, r)
	if err != nil || CheckNetworkData(e) != nil {
		t.Fatalf("good entry: %v %v", err, CheckNetworkData(e))
	}
	bad := resourceapi.AllocatedDeviceStatus{Device: "x", NetworkData: &resourceapi.NetworkDeviceData{IPs: []string{"10.0.0.2"}, HardwareAddress: "zz"}}
	err = CheckNetworkData(bad)
	for _, want := range []string{"interfaceName is empty", "not in CIDR form", "hardwareAddress"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if CheckNetworkData(resourceapi.AllocatedDeviceStatus{Device: "x"}) == nil {
		t.Error("an entry without networkData passed")
	}
}

func TestSelectorFor(t *testing.T) {
	if got := SelectorFor("c", "", "n"); strings.Contains(got, "podNetworkNamespace") || !strings.Contains(got, `podNetwork == "n"`) {
		t.Errorf("cluster-scoped selector %s", got)
	}
	if got := SelectorFor("c", "ns", "n"); !strings.Contains(got, `podNetworkNamespace == "ns"`) {
		t.Errorf("namespaced selector %s", got)
	}
}
