// Package link owns netclass's network devices: veth pairs, bridges, VXLAN
// devices with their flood entries, and IFBs. Callers pass names and
// parameters; this package speaks netlink.
package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/plugins/kernel/nldump"
)

// IsNotFound reports whether err means the link does not exist.
func IsNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, syscall.ENODEV)
}

// ByName finds a link in the calling thread's namespace.
func ByName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find link %q: %w", name, err)
	}
	return l, nil
}

// ByIndex finds a link by index in the calling thread's namespace.
func ByIndex(index int) (netlink.Link, error) {
	l, err := netlink.LinkByIndex(index)
	if err != nil {
		return nil, fmt.Errorf("find link %d: %w", index, err)
	}
	return l, nil
}

// Delete removes the named link; a link that is already gone is success.
func Delete(name string) error {
	l, err := netlink.LinkByName(name)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find link %q: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil && !IsNotFound(err) {
		return fmt.Errorf("delete link %q: %w", name, err)
	}
	return nil
}

// List returns every link of the calling thread's namespace.
func List() ([]netlink.Link, error) {
	ls, err := nldump.Retry(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	return ls, nil
}

// Ports returns the links enslaved to the bridge with the given index.
func Ports(bridgeIndex int) ([]netlink.Link, error) {
	all, err := List()
	if err != nil {
		return nil, err
	}
	var ports []netlink.Link
	for _, l := range all {
		if l.Attrs().MasterIndex == bridgeIndex {
			ports = append(ports, l)
		}
	}
	return ports, nil
}

// Up sets a link administratively up.
func Up(l netlink.Link) error {
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("set link %q up: %w", l.Attrs().Name, err)
	}
	return nil
}

// VethPair describes a veth whose host end stays in the calling thread's
// namespace and whose pod end is created directly in the pod's namespace.
type VethPair struct {
	HostName    string
	PodName     string
	PodNSFd     int
	MTU         int
	PodMAC      net.HardwareAddr
	MasterIndex int // bridge of the host end; 0 for none
	Alias       string
}

// CreateVeth creates the pair with the host end up, then enslaves the host
// end, puts it in its port's link group (DeletePort) and gives it its alias
// in one more request, and returns it. On an error after the pair was made
// the host end is returned too, for the caller to remove.
func CreateVeth(p VethPair) (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = p.HostName
	attrs.MTU = p.MTU
	attrs.Flags = net.FlagUp
	// No MasterIndex: netlink would enslave in a request of its own (the
	// kernel ignores IFLA_IFALIAS on creation, and the group needs the index).
	v := &netlink.Veth{
		LinkAttrs:        attrs,
		PeerName:         p.PodName,
		PeerHardwareAddr: p.PodMAC,
		PeerNamespace:    netlink.NsFd(p.PodNSFd),
	}
	if err := netlink.LinkAdd(v); err != nil {
		return nil, fmt.Errorf("create veth %q (pod end %q): %w", p.HostName, p.PodName, err)
	}
	if v.Index == 0 { // netlink looks the index up after creating; it failed
		host, err := ByName(p.HostName)
		if err != nil {
			return v, err
		}
		v.Index = host.Attrs().Index
	}
	change := []*nl.RtAttr{nl.NewRtAttr(unix.IFLA_GROUP, nl.Uint32Attr(PortGroup(v.Index)))}
	if p.MasterIndex != 0 {
		change = append(change, nl.NewRtAttr(unix.IFLA_MASTER, nl.Uint32Attr(uint32(p.MasterIndex))))
	}
	if p.Alias != "" {
		change = append(change, nl.NewRtAttr(unix.IFLA_IFALIAS, []byte(p.Alias)))
	}
	if err := setLink(v, false, change...); err != nil {
		return v, fmt.Errorf("enslave %q, set its link group and alias: %w", p.HostName, err)
	}
	host, err := ByName(p.HostName)
	if err != nil {
		return v, err
	}
	return host, nil
}

// setLink changes a live link in one RTM_SETLINK: the attributes given,
// and the link up when up. One request takes the kernel's RTNL lock once,
// where netlink's setters take it once per attribute: during a burst of
// pod starts every such request waits for the lock behind the node's
// other sandboxes' devices.
func setLink(l netlink.Link, up bool, attrs ...*nl.RtAttr) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(l.Attrs().Index)
	if up {
		msg.Flags, msg.Change = unix.IFF_UP, unix.IFF_UP
	}
	req.AddData(msg)
	for _, a := range attrs {
		req.AddData(a)
	}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// VethPeer returns the index of the other end of a veth (valid in the
// peer's namespace), or 0 when l is not a veth or its peer is gone. It is
// the link's IFLA_LINK, which veth reports as its peer's index (ip link's
// "@ifN"), so the link as read answers it: asking the driver (ethtool's
// peer_ifindex) costs a socket and an ioctl more, and a policy sync
// locates every port it changes.
func VethPeer(l netlink.Link) int {
	if _, ok := l.(*netlink.Veth); !ok {
		return 0
	}
	return l.Attrs().ParentIndex
}

// Addrs returns the link's addresses of one family (nil link: every link's).
func Addrs(l netlink.Link, v6 bool) ([]netip.Addr, error) {
	family := netlink.FAMILY_V4
	if v6 {
		family = netlink.FAMILY_V6
	}
	addrs, err := nldump.Retry(func() ([]netlink.Addr, error) { return netlink.AddrList(l, family) })
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.IsLinkLocalUnicast() {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// HolderOf returns the link that has the address.
func HolderOf(addr netip.Addr) (netlink.Link, error) {
	family := netlink.FAMILY_V4
	if addr.Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := nldump.Retry(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, family) })
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
			return ByIndex(a.LinkIndex)
		}
	}
	return nil, fmt.Errorf("no link has address %s", addr)
}

// LinksTo reports whether l's other end (a veth's peer) lives in the
// network namespace at nsPath, as the current namespace numbers the
// namespaces it links to (l's link-netnsid against nsPath's id). Peer
// indexes alone prove nothing: each namespace numbers its own links, so a
// pod can make a veth pair of its own whose peer index names some host
// interface.
func LinksTo(l netlink.Link, nsPath string) (bool, error) {
	f, err := os.Open(nsPath)
	if err != nil {
		return false, fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer f.Close()
	id, err := netlink.GetNetNsIdByFd(int(f.Fd()))
	if err != nil {
		return false, fmt.Errorf("id of network namespace %s: %w", nsPath, err)
	}
	return id >= 0 && id == l.Attrs().NetNsID, nil
}
