package link

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
)

// A node device netclass creates for a network (a netclass-bridge bridge, a
// VNI's VXLAN device and bridge) carries the network that owns it as its
// alias (IFLA_IFALIAS), so that no other network joins it: two networks on
// one device would share each other's traffic. A device without the tag (an
// admin's bridge) is joined as it is and never tagged.
const ownerPrefix = "netclass.dev/network="

// maxAliasLen keeps the alias well below the kernel's IFALIASZ (256).
const maxAliasLen = 128

// OwnerAlias is the alias that tags a device as owned by the network.
func OwnerAlias(network string) string {
	a := ownerPrefix + network
	if len(a) <= maxAliasLen {
		return a
	}
	sum := sha256.Sum256([]byte(network))
	return ownerPrefix + "sha256:" + hex.EncodeToString(sum[:16])
}

// ownerOf returns the network tag of an alias, "" when there is none.
func ownerOf(alias string) string {
	if !strings.HasPrefix(alias, ownerPrefix) {
		return ""
	}
	return strings.TrimPrefix(alias, ownerPrefix)
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
	if owner == "" || l.Attrs().Alias == OwnerAlias(network) {
		return nil
	}
	return &OwnedError{Device: l.Attrs().Name, Owner: owner, Network: network}
}

// Owned reports whether the link is tagged as the network's.
func Owned(l netlink.Link, network string) bool { return l.Attrs().Alias == OwnerAlias(network) }

// Untagged reports whether the link carries no network tag.
func Untagged(l netlink.Link) bool { return ownerOf(l.Attrs().Alias) == "" }

// tag marks a device netclass just created as the network's.
func tag(l netlink.Link, network string) error {
	if network == "" {
		return nil
	}
	if err := netlink.LinkSetAlias(l, OwnerAlias(network)); err != nil {
		return fmt.Errorf("tag %q with network %q: %w", l.Attrs().Name, network, err)
	}
	l.Attrs().Alias = OwnerAlias(network)
	return nil
}
