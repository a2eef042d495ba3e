package netspec

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// A network that spans nodes (VXLAN, VLAN, SR-IOV) puts the pods of every
// node on one subnet. host-local allocates from files on each node, so the
// same range on two nodes would hand out the same address twice. Each node
// therefore allocates from its own block of every host-local range: the
// block given by its node index (assigned once per node by
// netclass-controller, the cluster-wide decision), carved here the same way
// on every node (the node-local one). A block is stable for as long as the
// node exists, so restarts never move a node's addresses.
//
// The split: a subnet is cut into 256 equal blocks, or into blocks of 16
// addresses when it is smaller than 4096 addresses (a /24 gives 16 nodes 16
// addresses each; a /16, 256 nodes 256 each). A node whose index has no block
// in a subnet does not offer the network.

const (
	blocksPerSubnet = 8 // log2 of the number of blocks a large subnet is cut into
	minBlockBits    = 4 // log2 of the smallest block (16 addresses)
)

// NodeBlock returns the first and last address of block index of subnet
// (both inside the subnet, never its network address nor, in IPv4, its
// broadcast address).
func NodeBlock(subnet netip.Prefix, index int) (netip.Addr, netip.Addr, error) {
	subnet = subnet.Masked()
	hostBits := subnet.Addr().BitLen() - subnet.Bits()
	blockBits := max(hostBits-blocksPerSubnet, minBlockBits)
	if blockBits > hostBits {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%s is too small to be shared by several nodes (fewer than %d addresses)", subnet, 1<<minBlockBits)
	}
	blocks := 1 << (hostBits - blockBits)
	if index < 0 || index >= blocks {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("%s has %d blocks of 2^%d addresses: none for node index %d", subnet, blocks, blockBits, index)
	}
	first := addrAt(subnet.Addr(), uint64(index), blockBits, 0)
	last := addrAt(subnet.Addr(), uint64(index)+1, blockBits, -1)
	if first == subnet.Addr() {
		first = first.Next() // the network address
	}
	if subnet.Addr().Is4() && !subnet.Contains(last.Next()) {
		last = last.Prev() // the broadcast address
	}
	return first, last, nil
}

// addrAt returns base + n<<shift + delta; the callers stay inside one subnet.
func addrAt(base netip.Addr, n uint64, shift int, delta int64) netip.Addr {
	b := base.As16()
	v := new(big.Int).SetBytes(b[:])
	v.Add(v, new(big.Int).Lsh(new(big.Int).SetUint64(n), uint(shift)))
	v.Add(v, big.NewInt(delta))
	var out [16]byte
	v.FillBytes(out[:])
	if base.Is4() {
		return netip.AddrFrom16(out).Unmap()
	}
	return netip.AddrFrom16(out)
}

// hostLocalRange is one entry of host-local's ranges.
type hostLocalRange struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
}

// CarveIPAM returns a host-local IPAM configuration whose every range is
// limited to the node's block (see NodeBlock), intersected with the range's
// own rangeStart/rangeEnd. Other IPAM types are returned unchanged. The
// other keys of the configuration are kept as they are.
func CarveIPAM(ipam json.RawMessage, index int) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if len(ipam) == 0 || json.Unmarshal(ipam, &obj) != nil || obj == nil {
		return ipam, nil
	}
	p := field.Path("ipam")
	// IPAM plugins decode JSON keys case-insensitively (Go's encoding/json):
	// a "Ranges" would reach host-local uncarved.
	for k := range obj {
		for _, want := range []string{"type", "ranges", "subnet"} {
			if k != want && strings.EqualFold(k, want) {
				return nil, field.Invalid(p.Child(k), "write it as %q", want)
			}
		}
	}
	var typ string
	if json.Unmarshal(obj["type"], &typ) != nil || typ != "host-local" {
		return ipam, nil
	}
	if _, legacy := obj["subnet"]; legacy {
		return nil, field.Invalid(p.Child("subnet"), "a network shared by several nodes needs host-local's ranges form, so each node can be given its own block")
	}
	var sets [][]hostLocalRange
	if err := json.Unmarshal(obj["ranges"], &sets); err != nil {
		return nil, field.Invalid(p.Child("ranges"), "must be a list of range sets: %v", err)
	}
	var errs field.Errors
	for i, set := range sets {
		for j := range set {
			if err := carveRange(&set[j], index); err != nil {
				errs.Add(p.Child("ranges").Index(i).Index(j), "%v", err)
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(sets)
	if err != nil {
		return nil, fmt.Errorf("encode ranges: %w", err)
	}
	obj["ranges"] = raw
	return json.Marshal(obj)
}

// carveRange narrows r to the node's block of its subnet.
func carveRange(r *hostLocalRange, index int) error {
	subnet, err := netip.ParsePrefix(r.Subnet)
	if err != nil {
		return fmt.Errorf("subnet %q: %w", r.Subnet, err)
	}
	first, last, err := NodeBlock(subnet, index)
	if err != nil {
		return err
	}
	if r.RangeStart != "" {
		s, err := netip.ParseAddr(r.RangeStart)
		if err != nil {
			return fmt.Errorf("rangeStart %q: %w", r.RangeStart, err)
		}
		first = maxAddr(first, s)
	}
	if r.RangeEnd != "" {
		e, err := netip.ParseAddr(r.RangeEnd)
		if err != nil {
			return fmt.Errorf("rangeEnd %q: %w", r.RangeEnd, err)
		}
		last = minAddr(last, e)
	}
	if last.Less(first) {
		return fmt.Errorf("node index %d's block of %s lies outside rangeStart-rangeEnd %s-%s", index, subnet, r.RangeStart, r.RangeEnd)
	}
	r.RangeStart, r.RangeEnd = first.String(), last.String()
	return nil
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return b
	}
	return a
}

func minAddr(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return a
	}
	return b
}
