package tc

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// A Share is one HTB tree on a link's egress, shared by everything that
// leaves through the link (a network's VXLAN device on a node):
//
//	root qdisc htb 1: default ffff
//	  └─ class 1:1  rate = ceil = capacity
//	       ├─ class 1:N     rate N's guarantee, ceil N's ceiling   (one per attachment)
//	       └─ class 1:ffff  rate Default, ceil capacity            (best effort)
//
// HTB puts a packet whose skb->priority names one of its leaf classes
// (1:N) into it without any filter; every other packet goes to 1:ffff. So
// whoever sets the priority of every packet (plugins/kernel/nft's share
// table, at the link's egress hook, before the qdisc) chooses its class.
// HTB serves each class its rate before lending what is left of the
// root's to the classes below their ceil: under congestion each class
// gets at least its rate.
type Share struct {
	// CapacityBytes is the root class's rate and ceil, bytes/s.
	CapacityBytes uint64
	// DefaultBytes is the best-effort class's guaranteed rate (its ceil is
	// the capacity); at least MinShareBytes.
	DefaultBytes uint64
	Classes      []ShareClass
}

// ShareClass is the leaf class 1:Minor.
type ShareClass struct {
	Minor                uint16
	RateBytes, CeilBytes uint64
}

// The handles of a Share's tree.
const (
	ShareRootMinor    = 1
	ShareDefaultMinor = 0xffff
	// MinShareBytes is the smallest rate HTB is given (1 frame per 10 ms).
	MinShareBytes = 1514 * 100
)

// ShareClassID is the class id (and the skb->priority) of minor in a Share.
func ShareClassID(minor uint16) uint32 { return netlink.MakeHandle(1, minor) }

// shareQdisc renders the root HTB; packets without a class of theirs go to
// the best-effort class.
func shareQdisc(linkIndex int) *netlink.Htb {
	q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: linkIndex, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	q.Defcls = ShareDefaultMinor
	return q
}

// shareClasses renders the tree's classes, the root first.
func (s Share) shareClasses(linkIndex int) []*netlink.HtbClass {
	class := func(parent uint32, minor uint16, rate, ceil uint64, prio uint32) *netlink.HtbClass {
		rate, ceil = max(rate, MinShareBytes), max(ceil, rate, MinShareBytes)
		return netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: linkIndex, Parent: parent, Handle: ShareClassID(minor)},
			netlink.HtbClassAttrs{Rate: rate * 8, Ceil: ceil * 8, Prio: prio})
	}
	root := ShareClassID(ShareRootMinor)
	out := []*netlink.HtbClass{class(netlink.MakeHandle(1, 0), ShareRootMinor, s.CapacityBytes, s.CapacityBytes, 0)}
	for _, c := range s.Classes {
		out = append(out, class(root, c.Minor, c.RateBytes, c.CeilBytes, 0))
	}
	return append(out, class(root, ShareDefaultMinor, s.DefaultBytes, s.CapacityBytes, 7))
}

// SetShare makes the link's egress the Share: the root HTB is created (or
// kept), every class of s is set, and the leaf classes s no longer has are
// deleted. A running class keeps its queue when only its rates change.
func SetShare(linkIndex int, s Share) error {
	if err := ensureShareQdisc(linkIndex); err != nil {
		return err
	}
	want := map[uint32]bool{}
	for _, c := range s.shareClasses(linkIndex) {
		want[c.Handle] = true
		if err := netlink.ClassReplace(c); err != nil {
			return fmt.Errorf("set htb class %s on link %d: %w", netlink.HandleStr(c.Handle), linkIndex, err)
		}
	}
	got, err := ShareClasses(linkIndex)
	if err != nil {
		return err
	}
	var errs []error
	for h, c := range got {
		if !want[h] {
			errs = append(errs, ignoreMissing(netlink.ClassDel(c), "delete htb class %s of link %d", netlink.HandleStr(h), linkIndex))
		}
	}
	return errors.Join(errs...)
}

// ensureShareQdisc makes the link's root qdisc the Share's HTB, unless it
// is already (HTB cannot be changed in place: a replace would fail).
func ensureShareQdisc(linkIndex int) error {
	l, err := netlink.LinkByIndex(linkIndex)
	if err != nil {
		return fmt.Errorf("link %d: %w", linkIndex, err)
	}
	qs, err := qdiscs(l)
	if err != nil {
		return err
	}
	want := shareQdisc(linkIndex)
	for _, q := range qs {
		if h, ok := q.(*netlink.Htb); ok && h.Parent == netlink.HANDLE_ROOT && h.Handle == want.Handle && h.Defcls == want.Defcls {
			return nil
		}
	}
	if err := netlink.QdiscReplace(want); err != nil {
		return missing(fmt.Errorf("set htb on link %d: %w", linkIndex, err), "htb")
	}
	return nil
}

// ShareClasses lists the HTB classes of the link's egress by handle.
func ShareClasses(linkIndex int) (map[uint32]*netlink.HtbClass, error) {
	l, err := netlink.LinkByIndex(linkIndex)
	if err != nil {
		return nil, fmt.Errorf("link %d: %w", linkIndex, err)
	}
	cs, err := netlink.ClassList(l, netlink.MakeHandle(1, 0))
	if err != nil {
		return nil, fmt.Errorf("list classes of %q: %w", l.Attrs().Name, err)
	}
	out := map[uint32]*netlink.HtbClass{}
	for _, c := range cs {
		if h, ok := c.(*netlink.HtbClass); ok {
			out[h.Handle] = h
		}
	}
	return out, nil
}

// DeleteShare removes the link's root HTB and its classes; none (or
// another root qdisc) is success.
func DeleteShare(linkIndex int) error {
	l, err := netlink.LinkByIndex(linkIndex)
	if err != nil {
		return ignoreMissing(err, "link %d", linkIndex)
	}
	qs, err := qdiscs(l)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if _, ok := q.(*netlink.Htb); ok && q.Attrs().Parent == netlink.HANDLE_ROOT {
			return ignoreMissing(netlink.QdiscDel(q), "delete htb of link %d", linkIndex)
		}
	}
	return nil
}
