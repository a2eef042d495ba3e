// Package publish advertises netclass's networks to the scheduler: one DRA
// device per network offered on the node, in ResourceSlices of the node's
// pool (shim/README.md, "What it publishes"). Building devices and slices is pure; the
// Publisher recomputes them when the network objects change and hands them to
// the kubelet plugin helper's ResourceSlice controller.
package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/netconf"
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

// hashLen is the number of bytes of the reference's SHA-256 in a device name:
// 64 bits, so that names of distinct networks do not collide in any cluster
// (a birthday collision needs about 4 billion networks).
const hashLen = 8

// readableLen bounds the readable part of a device name so that "-", the hash
// and the longest slot or VF suffix ("-vf65535", "-vfa" + 4 hex) still fit a
// DNS label (63).
const readableLen = 63 - 1 - 2*hashLen - len("-vf65535")

// DeviceName is the stable device name of a network: a readable part from its
// namespace and name, and a 64-bit hash of the full reference so names never
// collide (Build still drops a duplicate, should one ever appear).
func DeviceName(ref attachment.NetworkRef) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{ref.Class, ref.Group, ref.Kind, ref.Namespace, ref.Name}, "/")))
	readable := ref.Name
	if ref.Namespace != "" {
		readable = ref.Namespace + "-" + ref.Name
	}
	return sanitize(readable) + "-" + hex.EncodeToString(sum[:hashLen])
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

// Attributes are the device attributes of a network (api/contract/README.md).
func Attributes(n network.Network) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		contract.AttributeStdPodNetwork:   str(n.Ref.Name),
		contract.AttributeStdNetworkClass: str(n.Ref.Class),
		contract.AttributePodNetwork:      str(n.Ref.Name),
		contract.AttributeType:            str(n.Type),
		contract.AttributeKind:            str(n.Ref.Kind),
	}
	if n.Ref.Namespace != "" {
		attrs[contract.AttributeStdPodNetworkNamespace] = str(n.Ref.Namespace)
	}
	if n.ClusterNetwork != "" {
		attrs[contract.AttributeClusterNetwork] = str(n.ClusterNetwork)
	}
	if n.Master != "" {
		attrs[contract.AttributeMaster] = str(n.Master)
	}
	if n.VNI != 0 {
		attrs[contract.AttributeVNI] = integer(n.VNI)
	}
	if n.VLANID != 0 {
		attrs[contract.AttributeVLANID] = integer(n.VLANID)
	}
	return attrs
}

// Capacity is the consumable capacity of a shared network device: its
// bandwidth per node and the request policy the scheduler applies to every
// claim's request (nil: the network declares none). A range policy always
// carries a default, as the API requires: what a claim without a request
// is allocated. Single-use devices (slots, VFs) carry none: each is one
// claim's, and consumable capacity needs allowMultipleAllocations.
func Capacity(p *bandwidth.Policy) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	if p == nil {
		return nil
	}
	quantity := func(v int64) *resource.Quantity { q := bandwidth.Quantity(v); return &q }
	rng := &resourceapi.CapacityRequestPolicyRange{Min: quantity(p.Min), Max: quantity(p.Max)}
	if p.Step > 0 {
		rng.Step = quantity(p.Step)
	}
	return map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		contract.CapacityBandwidth: {
			Value:         bandwidth.Quantity(p.Capacity),
			RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: quantity(p.Default), ValidRange: rng},
		},
	}
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func integer(i int) resourceapi.DeviceAttribute {
	v := int64(i)
	return resourceapi.DeviceAttribute{IntValue: &v}
}

// VF is one SR-IOV virtual function of a PF.
type VF struct {
	Addr  string // PCI address
	Index int    // N of the PF's virtfnN
}

// VFName is the device name of a VF of a network's device: by its index, or
// by a hash of its PCI address when the index is unknown (-1).
func VFName(base string, vf VF) string {
	if vf.Index >= 0 {
		return fmt.Sprintf("%s-vf%d", base, vf.Index)
	}
	sum := sha256.Sum256([]byte(vf.Addr))
	return base + "-vfa" + hex.EncodeToString(sum[:2])
}

// Attributes of a VF device besides its network's.
const (
	AttributePCIAddress resourceapi.QualifiedName = contract.DriverName + "/pciAddress"
	AttributeVFIndex    resourceapi.QualifiedName = contract.DriverName + "/vfIndex"
)

// ReasonDuplicateDevice: a device name is already taken by an earlier network
// of the list (a pool with a duplicate name would be refused as a whole).
const ReasonDuplicateDevice = "DuplicateDeviceName"

// Build returns the devices of the networks, what each device name stands
// for, and the devices it dropped because their name was already taken. In
// Shared mode each network is one shareable device; in Slots mode it is slots
// devices. An SR-IOV network is one single-use device per VF: the VF its
// deviceID names, or each VF of its master PF (vfs, by PF name).
func Build(nets []network.Network, vfs map[string][]VF, mode Mode, slots int) ([]resourceapi.Device, map[string]network.Offer, []network.Skip) {
	b := builder{table: make(map[string]network.Offer, len(nets))}
	for _, n := range nets {
		base := DeviceName(n.Ref)
		switch {
		case n.Type == netconf.TypeSRIOV:
			for _, vf := range sriovVFs(n, vfs) {
				attrs := Attributes(n)
				attrs[AttributePCIAddress] = str(vf.Addr)
				if vf.Index >= 0 {
					attrs[AttributeVFIndex] = integer(vf.Index)
				}
				b.add(resourceapi.Device{Name: VFName(base, vf), Attributes: attrs}, network.Offer{Network: n, DeviceID: vf.Addr})
			}
		case mode == Shared:
			shared := true
			b.add(resourceapi.Device{Name: base, Attributes: Attributes(n), Capacity: Capacity(n.Bandwidth), AllowMultipleAllocations: &shared},
				network.Offer{Network: n})
		default:
			for i := range slots {
				b.add(resourceapi.Device{Name: SlotName(base, i), Attributes: Attributes(n)}, network.Offer{Network: n})
			}
		}
	}
	return b.devices, b.table, b.skips
}

// builder collects devices, keeping the first of any name.
type builder struct {
	devices []resourceapi.Device
	table   map[string]network.Offer
	skips   []network.Skip
}

func (b *builder) add(d resourceapi.Device, o network.Offer) {
	if prev, taken := b.table[d.Name]; taken {
		b.skips = append(b.skips, network.Skip{Ref: o.Network.Ref, Reason: ReasonDuplicateDevice,
			Message: fmt.Sprintf("device name %s is already published for %s", d.Name, prev.Network.Ref)})
		return
	}
	b.devices = append(b.devices, d)
	b.table[d.Name] = o
}

// sriovVFs are the VFs an SR-IOV network offers: the one its deviceID names
// (index -1 when it is not among the master's), else the master's.
func sriovVFs(n network.Network, vfs map[string][]VF) []VF {
	if n.DeviceID == "" {
		return vfs[n.Master]
	}
	for _, vf := range vfs[n.Master] {
		if vf.Addr == n.DeviceID {
			return []VF{vf}
		}
	}
	return []VF{{Addr: n.DeviceID, Index: -1}}
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
