// Package publish advertises netclass's networks to the scheduler: one DRA
// device per network offered on the node, in ResourceSlices of the node's
// pool (DESIGN.md "ResourceSlices"). Building devices and slices is pure; the
// Publisher recomputes them when the network objects change and hands them to
// the kubelet plugin helper's ResourceSlice controller.
package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

// Mode says how many pods one device serves.
type Mode int

const (
	// Shared publishes one device per network with allowMultipleAllocations,
	// so every claim on the network shares it (DRAConsumableCapacity).
	Shared Mode = iota
	// Slots is the fallback for API servers that drop allowMultipleAllocations:
	// each network becomes N ordinary devices, one claim each.
	Slots
)

func (m Mode) String() string {
	if m == Slots {
		return "slots"
	}
	return "shared"
}

// MaxDevicesPerSlice is the API's limit (resource.k8s.io/v1 ResourceSliceMaxDevices).
const MaxDevicesPerSlice = resourceapi.ResourceSliceMaxDevices

// readableLen bounds the readable part of a device name so that the hash and
// a slot suffix still fit a DNS label (63).
const readableLen = 48

// DeviceName is the stable device name of a network: a readable part from its
// namespace and name, and a hash of the full reference so names never collide.
func DeviceName(ref attachment.NetworkRef) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{ref.Class, ref.Group, ref.Kind, ref.Namespace, ref.Name}, "/")))
	readable := ref.Name
	if ref.Namespace != "" {
		readable = ref.Namespace + "-" + ref.Name
	}
	return sanitize(readable) + "-" + hex.EncodeToString(sum[:4])
}

// SlotName is the name of slot i of a network's device in Slots mode.
func SlotName(base string, i int) string { return fmt.Sprintf("%s-s%d", base, i) }

// sanitize keeps lowercase letters, digits and inner dashes, at most readableLen.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	out := b.String()
	if len(out) > readableLen {
		out = out[:readableLen]
	}
	out = strings.Trim(out, "-")
	if out == "" || out[0] < 'a' {
		out = "n" + out
	}
	return out
}

// Attributes are the device attributes of a network (DESIGN.md).
func Attributes(n network.Network) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		attachment.AttributeStdPodNetwork:   str(n.Ref.Name),
		attachment.AttributeStdNetworkClass: str(n.Ref.Class),
		attachment.AttributePodNetwork:      str(n.Ref.Name),
		attachment.AttributeType:            str(n.Type),
		attachment.AttributeKind:            str(n.Ref.Kind),
	}
	if n.Ref.Namespace != "" {
		attrs[attachment.AttributeStdPodNetworkNamespace] = str(n.Ref.Namespace)
	}
	if n.ClusterNetwork != "" {
		attrs[attachment.AttributeClusterNetwork] = str(n.ClusterNetwork)
	}
	if n.Master != "" {
		attrs[attachment.AttributeMaster] = str(n.Master)
	}
	if n.VNI != 0 {
		attrs[attachment.AttributeVNI] = integer(n.VNI)
	}
	if n.VLANID != 0 {
		attrs[attachment.AttributeVLANID] = integer(n.VLANID)
	}
	return attrs
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func integer(i int) resourceapi.DeviceAttribute {
	v := int64(i)
	return resourceapi.DeviceAttribute{IntValue: &v}
}

// Build returns the devices of the networks and which network each device
// name stands for. In Shared mode each network is one shareable device; in
// Slots mode it is slots devices.
func Build(nets []network.Network, mode Mode, slots int) ([]resourceapi.Device, map[string]network.Network) {
	devices := make([]resourceapi.Device, 0, len(nets))
	table := make(map[string]network.Network, len(nets))
	for _, n := range nets {
		base := DeviceName(n.Ref)
		if mode == Shared {
			shared := true
			devices = append(devices, resourceapi.Device{Name: base, Attributes: Attributes(n), AllowMultipleAllocations: &shared})
			table[base] = n
			continue
		}
		for i := range slots {
			name := SlotName(base, i)
			devices = append(devices, resourceapi.Device{Name: name, Attributes: Attributes(n)})
			table[name] = n
		}
	}
	return devices, table
}

// Slices splits devices into slices of at most perSlice devices, keeping
// their order. A pool without devices is still one (empty) slice, so the
// scheduler knows the pool exists and is empty.
func Slices(devices []resourceapi.Device, perSlice int) []resourceslice.Slice {
	if perSlice <= 0 || perSlice > MaxDevicesPerSlice {
		perSlice = MaxDevicesPerSlice
	}
	if len(devices) == 0 {
		return []resourceslice.Slice{{}}
	}
	var out []resourceslice.Slice
	for start := 0; start < len(devices); start += perSlice {
		end := min(start+perSlice, len(devices))
		out = append(out, resourceslice.Slice{Devices: devices[start:end:end]})
	}
	return out
}
