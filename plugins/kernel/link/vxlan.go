package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/netclass-dev/netclass/plugins/kernel/nldump"
)

// VXLANSpec is a VXLAN device shared by every pod of one VNI on a host.
type VXLANSpec struct {
	Name        string
	VNI         int
	Port        int
	Local       netip.Addr // invalid: any
	Group       netip.Addr // invalid: unicast
	MasterIndex int        // underlay device; 0: routed by local
	Learning    bool
	// TOS of the outer IP header (IPv4 TOS, IPv6 traffic class):
	// TOSInherit copies the encapsulated packet's.
	TOS         int
	MTU         int
	BridgeIndex int // bridge the device is a port of
	// Owner is the network the device serves (see BridgeSpec.Owner).
	Owner string
	// NodeManaged: see BridgeSpec.NodeManaged.
	NodeManaged bool
}

// TOSInherit is the IFLA_VXLAN_TOS that copies the DSCP of the packet
// entering the tunnel into the outer header (`ip link ... tos inherit`). The
// kernel writes the outer ECN field from the inner one whatever the TOS
// setting (ip_tunnel_ecn_encap) and combines them back on decapsulation as
// RFC 6040 says (INET_ECN_decapsulate).
const TOSInherit = 1

// EnsureVXLAN returns the VXLAN device, creating it (enslaved to the bridge
// and up) when absent. An existing device with other tunnel settings is an
// error rather than a silent reuse, except its TOS: a device an older
// netclass made without one is brought to the spec's in place, without
// taking it down (the kernel changes IFLA_VXLAN_TOS on a live device).
func EnsureVXLAN(s VXLANSpec) (*netlink.Vxlan, error) {
	vx, err := findVXLAN(s.Name)
	if IsNotFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.MasterIndex, attrs.Flags = s.Name, s.MTU, s.BridgeIndex, net.FlagUp
		err = netlink.LinkAdd(&netlink.Vxlan{
			LinkAttrs: attrs, VxlanId: s.VNI, Port: s.Port, Learning: s.Learning, TOS: s.TOS,
			SrcAddr: addrIP(s.Local), Group: addrIP(s.Group), VtepDevIndex: s.MasterIndex,
		})
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("create vxlan %q: %w", s.Name, err)
		}
		created := err == nil
		if vx, err = findVXLAN(s.Name); err == nil && created {
			err = tag(vx, s.Owner, s.NodeManaged)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := CheckOwner(vx, s.Owner); err != nil {
		return nil, err
	}
	if s.NodeManaged {
		if err := tag(vx, s.Owner, true); err != nil {
			return nil, err
		}
	}
	if diff := vxlanDiff(vx, s); diff != "" {
		return nil, fmt.Errorf("vxlan %q exists with other settings: %s", s.Name, diff)
	}
	if vx.TOS != s.TOS {
		if err := setVXLANTOS(vx, s.TOS); err != nil {
			return nil, err
		}
		vx.TOS = s.TOS
	}
	return vx, nil
}

// setVXLANTOS changes the outer TOS of a live VXLAN device; traffic keeps
// flowing (changelink swaps the setting the transmit path reads per packet).
func setVXLANTOS(vx *netlink.Vxlan, tos int) error {
	return changeLinkData(vx, func(data *nl.RtAttr) {
		data.AddRtAttr(nl.IFLA_VXLAN_TOS, nl.Uint8Attr(uint8(tos)))
	})
}

// CheckVXLAN verifies the device exists with the spec's tunnel settings
// and flood entries.
func CheckVXLAN(s VXLANSpec, remotes []netip.Addr) error {
	vx, err := findVXLAN(s.Name)
	if err != nil {
		return err
	}
	if err := CheckOwner(vx, s.Owner); err != nil {
		return err
	}
	if diff := vxlanDiff(vx, s); diff != "" {
		return fmt.Errorf("vxlan %q has other settings: %s", s.Name, diff)
	}
	if vx.TOS != s.TOS {
		return fmt.Errorf("vxlan %q has tos %s, want %s", s.Name, tosString(vx.TOS), tosString(s.TOS))
	}
	if vx.OperState == netlink.OperDown {
		return fmt.Errorf("vxlan %q is down", s.Name)
	}
	have, err := FloodEntries(vx)
	if err != nil {
		return err
	}
	for _, r := range remotes {
		if !slices.Contains(have, r) {
			return fmt.Errorf("vxlan %q has no flood entry for %s", s.Name, r)
		}
	}
	return nil
}

func findVXLAN(name string) (*netlink.Vxlan, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find vxlan %q: %w", name, err)
	}
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		return nil, fmt.Errorf("link %q exists and is a %s, not a vxlan", name, l.Type())
	}
	return vx, nil
}

// vxlanDiff describes how an existing device differs from the spec.
func vxlanDiff(vx *netlink.Vxlan, s VXLANSpec) string {
	switch {
	case vx.VxlanId != s.VNI:
		return fmt.Sprintf("vni %d, want %d", vx.VxlanId, s.VNI)
	case vx.Port != s.Port:
		return fmt.Sprintf("port %d, want %d", vx.Port, s.Port)
	case !ipEqual(vx.SrcAddr, s.Local):
		return fmt.Sprintf("local %v, want %v", vx.SrcAddr, s.Local)
	case !ipEqual(vx.Group, s.Group):
		return fmt.Sprintf("group %v, want %v", vx.Group, s.Group)
	case s.MasterIndex != 0 && vx.VtepDevIndex != s.MasterIndex:
		return fmt.Sprintf("underlay device index %d, want %d", vx.VtepDevIndex, s.MasterIndex)
	case vx.Learning != s.Learning:
		return fmt.Sprintf("learning %v, want %v", vx.Learning, s.Learning)
	case s.BridgeIndex != 0 && vx.MasterIndex != s.BridgeIndex:
		return fmt.Sprintf("bridge index %d, want %d", vx.MasterIndex, s.BridgeIndex)
	}
	return ""
}

// tosString shows a TOS setting as ip-link does.
func tosString(tos int) string {
	if tos == TOSInherit {
		return "inherit"
	}
	return fmt.Sprintf("%#02x", tos)
}

func addrIP(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return net.IP(a.AsSlice())
}

func ipEqual(ip net.IP, a netip.Addr) bool {
	if len(ip) == 0 || ip.IsUnspecified() {
		return !a.IsValid()
	}
	b, ok := netip.AddrFromSlice(ip)
	return ok && a.IsValid() && b.Unmap() == a.Unmap()
}

func zeroMAC() net.HardwareAddr { return net.HardwareAddr{0, 0, 0, 0, 0, 0} }

// AddFloodEntries appends an all-zeros FDB entry per remote VTEP that is
// missing, so broadcast, unknown unicast and multicast reach every remote
// (`bridge fdb append 00:00:00:00:00:00 dev vx dst <remote>`).
func AddFloodEntries(vx netlink.Link, remotes []netip.Addr) error {
	have, err := FloodEntries(vx)
	if err != nil {
		return err
	}
	for _, r := range remotes {
		if slices.Contains(have, r) {
			continue
		}
		err := netlink.NeighAppend(&netlink.Neigh{
			LinkIndex: vx.Attrs().Index, Family: syscall.AF_BRIDGE,
			State: netlink.NUD_PERMANENT, Flags: netlink.NTF_SELF,
			IP: addrIP(r), HardwareAddr: zeroMAC(),
		})
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("add flood entry %s to vxlan %q: %w", r, vx.Attrs().Name, err)
		}
	}
	return nil
}

// SetFloodEntries makes the device's all-zeros FDB entries exactly remotes:
// missing ones are appended first, then stale ones deleted, so flooding to
// the remotes that stay never stops.
func SetFloodEntries(vx netlink.Link, remotes []netip.Addr) error {
	if err := AddFloodEntries(vx, remotes); err != nil {
		return err
	}
	have, err := FloodEntries(vx)
	if err != nil {
		return err
	}
	for _, h := range have {
		if slices.Contains(remotes, h) {
			continue
		}
		err := netlink.NeighDel(&netlink.Neigh{
			LinkIndex: vx.Attrs().Index, Family: syscall.AF_BRIDGE,
			State: netlink.NUD_PERMANENT, Flags: netlink.NTF_SELF,
			IP: addrIP(h), HardwareAddr: zeroMAC(),
		})
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("delete flood entry %s of vxlan %q: %w", h, vx.Attrs().Name, err)
		}
	}
	return nil
}

// FloodEntries lists the remote VTEPs of the device's all-zeros FDB entries.
func FloodEntries(vx netlink.Link) ([]netip.Addr, error) {
	idx := vx.Attrs().Index
	neighs, err := nldump.Retry(func() ([]netlink.Neigh, error) { return netlink.NeighList(idx, syscall.AF_BRIDGE) })
	if err != nil {
		return nil, fmt.Errorf("list fdb of vxlan %q: %w", vx.Attrs().Name, err)
	}
	var out []netip.Addr
	for _, n := range neighs {
		if n.LinkIndex != idx || n.HardwareAddr.String() != zeroMAC().String() || n.IP == nil {
			continue
		}
		if a, ok := netip.AddrFromSlice(n.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}
