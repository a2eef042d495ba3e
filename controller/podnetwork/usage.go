package podnetwork

import (
	"encoding/json"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
)

// deviceID names one device of a driver's pool, as allocation results do.
type deviceID struct{ pool, device string }

// DeviceNetworks maps the devices netclass publishes to the PodNetwork each one attaches
// to, from the device attributes of the driver's ResourceSlices. Devices of namespaced
// networks (with a podNetworkNamespace attribute) are not PodNetworks and are left out.
type DeviceNetworks map[deviceID]string

// SliceDevices reads the PodNetwork attribute of every netclass.dev device in slices:
// resource.kubernetes.io/podNetwork (the NetworkClass proposal), else
// netclass.dev/podNetwork (the Multi-Network DRA design).
func SliceDevices(slices []*resourceapi.ResourceSlice) DeviceNetworks {
	out := DeviceNetworks{}
	for _, s := range slices {
		if s.Spec.Driver != contract.DriverName {
			continue
		}
		for _, d := range s.Spec.Devices {
			if name := podNetworkAttribute(d.Attributes); name != "" {
				out[deviceID{s.Spec.Pool.Name, d.Name}] = name
			}
		}
	}
	return out
}

func podNetworkAttribute(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) string {
	if ns := stringAttr(attrs, contract.AttributeStdPodNetworkNamespace); ns != "" {
		return ""
	}
	for _, key := range []resourceapi.QualifiedName{
		contract.AttributeStdPodNetwork,
		contract.AttributePodNetwork,
		"podNetwork", // unqualified names are in the driver's own domain
	} {
		if v := stringAttr(attrs, key); v != "" {
			return v
		}
	}
	return ""
}

func stringAttr(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, key resourceapi.QualifiedName) string {
	if a, ok := attrs[key]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// ClaimNetworks returns the PodNetworks an allocated claim uses through netclass.dev
// devices: each allocation result of the driver is resolved through the device's
// attributes in devices and through the claim's status entry for that device
// (data.podNetwork). Unallocated claims use nothing; other drivers are ignored.
func ClaimNetworks(claim *resourceapi.ResourceClaim, devices DeviceNetworks) []string {
	if claim.Status.Allocation == nil {
		return nil
	}
	allocated := map[deviceID]bool{}
	set := map[string]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != contract.DriverName {
			continue
		}
		id := deviceID{r.Pool, r.Device}
		allocated[id] = true
		if name := devices[id]; name != "" {
			set[name] = true
		}
	}
	for _, d := range claim.Status.Devices {
		if d.Driver != contract.DriverName || !allocated[deviceID{d.Pool, d.Device}] || d.Data == nil {
			continue
		}
		var data contract.ClaimStatusData
		if json.Unmarshal(d.Data.Raw, &data) == nil && data.PodNetwork != "" && data.PodNetworkNamespace == "" {
			set[data.PodNetwork] = true
		}
	}
	return sortedKeys(set)
}

// Users maps each PodNetwork name to the sorted "namespace/name" keys of the claims using it.
func Users(claims []*resourceapi.ResourceClaim, devices DeviceNetworks) map[string][]string {
	out := map[string][]string{}
	for _, c := range claims {
		key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}.String()
		for _, n := range ClaimNetworks(c, devices) {
			out[n] = append(out[n], key)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
