package link

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/nldump"
)

// A node device netclass creates for a network (a netclass-bridge bridge, a
// VNI's VXLAN device and bridge) carries the network that owns it as its
// alias (IFLA_IFALIAS), so that no other network joins it: two networks on
// one device would share each other's traffic. A device without the tag (an
// admin's bridge) is joined as it is and never tagged.
//
// A device netclass-dra's node engine manages carries the network under
// another prefix: the plugins still refuse to join it for another network,
// but leave its lifetime (creation, flood list, removal) to the node daemon.
const (
	ownerPrefix = "netclass.dev/network="
	nodePrefix  = "netclass.dev/node-network="
)

// maxAliasLen keeps the alias well below the kernel's IFALIASZ (256).
const maxAliasLen = 128

// OwnerAlias is the alias that tags a device as owned by the network.
func OwnerAlias(network string) string { return alias(ownerPrefix, network) }

// NodeOwnerAlias is the alias of a device of the network that netclass-dra manages.
func NodeOwnerAlias(network string) string { return alias(nodePrefix, network) }

func alias(prefix, network string) string {
	a := prefix + network
	if len(a) <= maxAliasLen {
		return a
	}
	sum := sha256.Sum256([]byte(network))
	return prefix + "sha256:" + hex.EncodeToString(sum[:16])
}

// ownerOf returns the network tag of an alias, "" when there is none.
func ownerOf(alias string) string {
	for _, p := range []string{ownerPrefix, nodePrefix} {
		if strings.HasPrefix(alias, p) {
			return strings.TrimPrefix(alias, p)
		}
	}
	return ""
}

// OwnedError: the device belongs to another network.
type OwnedError struct {
	Device, Owner, Network string
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("device %q belongs to network %q, not to network %q: a node device serves one network", e.Device, e.Owner, e.Network)
}

// CheckOwner fails when the link is tagged by another network than network.
func CheckOwner(l netlink.Link, network string) error {
	owner := ownerOf(l.Attrs().Alias)
	if owner == "" || Owned(l, network) {
		return nil
	}
	return &OwnedError{Device: l.Attrs().Name, Owner: owner, Network: network}
}

// Owned reports whether the link is tagged as the network's (by a plugin or
// by the node daemon).
func Owned(l netlink.Link, network string) bool {
	a := l.Attrs().Alias
	return a == OwnerAlias(network) || a == NodeOwnerAlias(network)
}

// Tagged reports whether netclass made the link (a plugin or netclass-dra
// tagged it with its network).
func Tagged(l netlink.Link) bool { return ownerOf(l.Attrs().Alias) != "" }

// NodeManaged reports whether netclass-dra manages the link's lifetime.
func NodeManaged(l netlink.Link) bool { return strings.HasPrefix(l.Attrs().Alias, nodePrefix) }

// NodeManagedOwner returns the network of a node-managed link ("" for other
// links; a hashed tag for a network with a very long name).
func NodeManagedOwner(l netlink.Link) string {
	if !NodeManaged(l) {
		return ""
	}
	return strings.TrimPrefix(l.Attrs().Alias, nodePrefix)
}

// Untagged reports whether the link carries no network tag.
func Untagged(l netlink.Link) bool { return ownerOf(l.Attrs().Alias) == "" }

// tag marks a device netclass just created as the network's (node-managed:
// as the node daemon's).
func tag(l netlink.Link, network string, managed bool) error {
	if network == "" {
		return nil
	}
	a := OwnerAlias(network)
	if managed {
		a = NodeOwnerAlias(network)
	}
	if l.Attrs().Alias == a {
		return nil
	}
	if err := netlink.LinkSetAlias(l, a); err != nil {
		return fmt.Errorf("tag %q with network %q: %w", l.Attrs().Name, network, err)
	}
	l.Attrs().Alias = a
	return nil
}

// NodeManagedLinks lists the links of this namespace that netclass-dra manages.
func NodeManagedLinks() ([]netlink.Link, error) {
	all, err := nldump.Retry(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []netlink.Link
	for _, l := range all {
		if NodeManaged(l) {
			out = append(out, l)
		}
	}
	return out, nil
}
