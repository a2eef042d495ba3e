package netspec

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/netclass-dev/netclass/api/contract"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// Segment is the layer-2 segment a network joins on a node. Two network
// objects on one segment would share node devices and so each other's
// traffic, so a segment belongs to exactly one network object:
//
//   - a VNI is one segment whatever its port and underlay: netclass-vxlan names
//     its node devices after the VNI alone (ncvx<VNI>, ncbr<VNI>);
//   - a VLAN ID is one segment per master, and a master left to each node
//     (empty) may be any master, so it overlaps every master;
//   - a netclass-bridge bridge is one segment per bridge name;
//   - an SR-IOV network with a vlan is that VLAN ID's segment on its PF
//     (the NIC switches its VFs' frames with the PF's sub-interface of the
//     VLAN and the wire); with a deviceID and no master, on any master.
type Segment struct {
	// Kind is SegmentVXLAN, SegmentVLAN or SegmentBridge; "" is no segment
	// (an SR-IOV network without a vlan: VFs are separate ports).
	Kind string
	// ID is the VNI or the VLAN ID.
	ID int
	// Device is the VLAN master ("" = the node's choice) or the bridge name.
	Device string
}

// Segment kinds.
const (
	SegmentVXLAN  = "vxlan"
	SegmentVLAN   = "vlan"
	SegmentBridge = "bridge"
)

func (s Segment) String() string {
	switch s.Kind {
	case SegmentVXLAN:
		return fmt.Sprintf("VNI %d", s.ID)
	case SegmentVLAN:
		if s.Device == "" {
			return fmt.Sprintf("VLAN ID %d (master chosen per node)", s.ID)
		}
		return fmt.Sprintf("VLAN ID %d on %s", s.ID, s.Device)
	case SegmentBridge:
		return fmt.Sprintf("bridge %s", s.Device)
	}
	return "no segment"
}

// Overlaps reports whether two segments can be the same on some node.
func (s Segment) Overlaps(o Segment) bool {
	if s.Kind == "" || s.Kind != o.Kind {
		return false
	}
	switch s.Kind {
	case SegmentVXLAN:
		return s.ID == o.ID
	case SegmentVLAN:
		return s.ID == o.ID && (s.Device == o.Device || s.Device == "" || o.Device == "")
	}
	return s.Device == o.Device
}

// Holder is a network object and the segment it asks for.
type Holder struct {
	// Kind is "PodNetwork" or "Network"; Namespace is empty for a PodNetwork.
	Kind, Namespace, Name string
	Created               time.Time
	Segment               Segment
	// Held: the object's SegmentHeld condition says it holds Segment.
	Held bool
}

func (h Holder) String() string {
	if h.Namespace == "" {
		return h.Kind + " " + h.Name
	}
	return fmt.Sprintf("%s %s/%s", h.Kind, h.Namespace, h.Name)
}

func (h Holder) same(o Holder) bool {
	return h.Kind == o.Kind && h.Namespace == o.Namespace && h.Name == o.Name
}

// before orders holders: the oldest first. Creation timestamps have
// one-second precision, so of two created in the same second the one found
// holding the segment first (Held) goes first: a network in use keeps its
// segment. Other ties are broken by kind, namespace, name, so every
// controller and node decides the same owner.
func (h Holder) before(o Holder) bool {
	if !h.Created.Equal(o.Created) {
		return h.Created.Before(o.Created)
	}
	if h.Held != o.Held {
		return h.Held
	}
	return cmp.Or(cmp.Compare(h.Kind, o.Kind), cmp.Compare(h.Namespace, o.Namespace), cmp.Compare(h.Name, o.Name)) < 0
}

// Owner returns the holder among all that holds h's segment before h, or nil
// when h may have it. all may contain h itself.
func Owner(h Holder, all []Holder) *Holder {
	var owner *Holder
	for i := range all {
		o := all[i]
		if o.same(h) || !o.Segment.Overlaps(h.Segment) || !o.before(h) {
			continue
		}
		if owner == nil || o.before(*owner) {
			owner = &all[i]
		}
	}
	return owner
}

// NetworkHolder describes a Network under its ClusterNetwork (nil when it does
// not exist: no segment can be told). A Network its ClusterNetwork does not
// let in (NotPermitted, the namespace's labels from ns) holds no segment: a
// tenant cannot reserve the IDs of a network it may not use.
func NetworkHolder(n *ncv1.Network, cn *ncv1.ClusterNetwork, ns NamespaceLabels) Holder {
	h := Holder{Kind: "Network", Namespace: n.Namespace, Name: n.Name, Created: n.CreationTimestamp.Time}
	switch {
	case cn == nil || NotPermitted(n, cn, ns) != "":
	case cn.Spec.Type == ncv1.NetworkTypeVXLAN && n.Spec.VNI != nil:
		h.Segment = Segment{Kind: SegmentVXLAN, ID: int(*n.Spec.VNI)}
	case cn.Spec.Type == ncv1.NetworkTypeVLAN && n.Spec.VLANID != nil:
		h.Segment = Segment{Kind: SegmentVLAN, ID: int(*n.Spec.VLANID)}
		if o := cn.Spec.DefaultOptions; o != nil && o.VLAN != nil {
			h.Segment.Device = string(o.VLAN.Master)
		}
	}
	h.Held = heldIn(n.Status.Conditions, h.Segment)
	return h
}

// PodNetworkHolder describes a netclass.dev PodNetwork; parameters that do not
// decode give no segment (the PodNetwork is invalid anyway).
func PodNetworkHolder(pn *mnv1.PodNetwork) Holder {
	h := Holder{Kind: "PodNetwork", Name: pn.Name, Created: pn.CreationTimestamp.Time}
	var p struct {
		Type   string `json:"type"`
		VNI    int    `json:"vni"`
		VLANID int    `json:"vlanId"`
		VLAN   int    `json:"vlan"` // netclass-sriov's
		Master string `json:"master"`
		Bridge string `json:"bridge"`
	}
	if json.Unmarshal(pn.Spec.Parameters.Raw, &p) != nil {
		return h
	}
	switch p.Type {
	case netconf.TypeVXLAN:
		h.Segment = Segment{Kind: SegmentVXLAN, ID: p.VNI}
	case netconf.TypeVLAN:
		h.Segment = Segment{Kind: SegmentVLAN, ID: p.VLANID, Device: p.Master}
	case netconf.TypeBridge:
		h.Segment = Segment{Kind: SegmentBridge, Device: cmp.Or(p.Bridge, netconf.DefaultBridge)}
	case netconf.TypeSRIOV:
		if p.VLAN > 0 { // 0: untagged
			h.Segment = Segment{Kind: SegmentVLAN, ID: p.VLAN, Device: p.Master}
		}
	}
	h.Held = heldIn(pn.Status.Conditions, h.Segment)
	return h
}

// Holders describes every object that may hold a segment: netclass.dev
// PodNetworks, and Networks with their ClusterNetworks (their namespaces'
// labels from ns). Objects being deleted still hold their segment until
// they are gone (their pods may still run).
func Holders(pns []*mnv1.PodNetwork, nets []*ncv1.Network, cns []*ncv1.ClusterNetwork, ns NamespaceLabels) []Holder {
	byName := make(map[string]*ncv1.ClusterNetwork, len(cns))
	for _, cn := range cns {
		byName[cn.Name] = cn
	}
	out := make([]Holder, 0, len(pns)+len(nets))
	for _, pn := range pns {
		if pn.Spec.Provider == contract.Provider {
			out = append(out, PodNetworkHolder(pn))
		}
	}
	for _, n := range nets {
		out = append(out, NetworkHolder(n, byName[n.Spec.ClusterNetworkName], ns))
	}
	return out
}

// ConflictMessage says why h cannot have its segment (owner from Owner). A
// Network's status names no Network of another namespace: a tenant probing
// IDs would learn the other tenants' namespaces and networks.
func ConflictMessage(h Holder, owner Holder) string {
	who := owner.String()
	if h.Namespace != "" && owner.Namespace != "" && owner.Namespace != h.Namespace {
		who = "a " + owner.Kind + " of another namespace"
	}
	return fmt.Sprintf("%s is already used by %s (created %s); a segment belongs to one network",
		h.Segment, who, owner.Created.UTC().Format(time.RFC3339))
}
