package netspec

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// Node is what the node rendering a network knows of itself and of the
// cluster: the node-local inputs of a rendering. netclass-controller makes
// the cluster-wide decisions (a ClusterNetwork's options and automatic
// remotes in each NodeNetwork, the node index); the node fills in the rest.
type Node struct {
	// Master is this node's underlay device, used when the network leaves
	// master (and, for VXLAN, local) to each node.
	Master string
	// Local is this node's underlay address: the VXLAN source address.
	Local netip.Addr
	// Peers are the underlay addresses of the other nodes: the VXLAN remotes
	// of a network that names neither remotes nor a multicast group.
	Peers []netip.Addr
	// Index is the node's index, which picks its block of every host-local
	// range of a network spanning nodes (NodeBlock); -1 while unassigned.
	Index int
}

// spansNodes reports whether pods of a network of this plugin type on
// different nodes share one segment (and so one subnet).
func spansNodes(pluginType string) bool {
	switch pluginType {
	case netconf.TypeVXLAN, netconf.TypeVLAN, netconf.TypeSRIOV:
		return true
	}
	return false
}

// PodNetworkParameters completes a netclass.dev PodNetwork's parameters with
// what the admin left to each node: for netclass-vxlan without master and
// local, this node's underlay device and address; without remotes and group,
// the other nodes' addresses; for netclass-vlan without master, the
// underlay device; and, for networks spanning nodes, the node's block of
// every host-local range. With node nil (the controller validating the
// object) a stand-in master is used and block 0 is carved, so an object
// every node would refuse is refused up front.
func PodNetworkParameters(params json.RawMessage, node *Node) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
		return params, nil // netconf reports a malformed object with its own words
	}
	var typ string
	_ = json.Unmarshal(obj["type"], &typ)
	set := func(k string, v any) {
		raw, _ := json.Marshal(v) // strings and address lists always encode
		obj[k] = raw
	}
	master := standInMaster
	if node != nil {
		master = node.Master
	}
	switch typ {
	case netconf.TypeVXLAN:
		if absent(obj, "master") && absent(obj, "local") {
			if master != "" {
				set("master", master)
			}
			if node != nil && node.Local.IsValid() {
				set("local", node.Local.String())
			}
			if node != nil && absent(obj, "remotes") && absent(obj, "group") {
				if peers := samefamily(node.Peers, node.Local); len(peers) > 0 {
					set("remotes", addrStrings(peers))
				}
			}
		}
	case netconf.TypeVLAN:
		if absent(obj, "master") && master != "" {
			set("master", master)
		}
	}
	if spansNodes(typ) && !absent(obj, "ipam") {
		carved, err := carve(obj["ipam"], node)
		if err != nil {
			return nil, err
		}
		obj["ipam"] = carved
	}
	return json.Marshal(obj)
}

// carve narrows host-local ranges to the node's block. Without a node it
// only checks that block 0 exists and returns ipam unchanged (what the
// controller shows is not any node's block).
func carve(ipam json.RawMessage, node *Node) (json.RawMessage, error) {
	if node == nil {
		if _, err := CarveIPAM(ipam, 0); err != nil {
			return nil, err
		}
		return ipam, nil
	}
	if node.Index < 0 {
		var head struct{ Type string }
		if json.Unmarshal(ipam, &head) == nil && head.Type == "host-local" {
			return nil, field.Invalid("ipam", "this node has no node index yet (netclass-controller assigns it), so it has no block of the network's ranges")
		}
		return ipam, nil
	}
	return CarveIPAM(ipam, node.Index)
}

func absent(obj map[string]json.RawMessage, k string) bool {
	v, ok := obj[k]
	return !ok || string(v) == "null" || string(v) == `""` || string(v) == "[]"
}

// samefamily keeps the addresses of local's family (all of them when local is unset).
func samefamily(addrs []netip.Addr, local netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if !local.IsValid() || a.Is4() == local.Is4() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

// String describes the node facts for logs and errors.
func (n *Node) String() string {
	if n == nil {
		return "no node"
	}
	return fmt.Sprintf("master %q, local %v, %d peers, index %d", n.Master, n.Local, len(n.Peers), n.Index)
}
