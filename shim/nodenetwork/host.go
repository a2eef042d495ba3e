package nodenetwork

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// LocalHost reads this machine's network devices.
type LocalHost struct {
	// SysRoot is where /sys and /lib/modules are looked up ("" = /).
	SysRoot string
}

// Link describes a device by name.
func (h LocalHost) Link(name string) (Link, bool) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return Link{}, false
	}
	return linkOf(ifi), true
}

// LinkWithAddress finds the device holding an address.
func (h LocalHost) LinkWithAddress(a netip.Addr) (Link, bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return Link{}, false
	}
	for i := range ifs {
		l := linkOf(&ifs[i])
		for _, have := range l.Addrs {
			if have == a.Unmap() {
				return l, true
			}
		}
	}
	return Link{}, false
}

// VLANSupported: the 8021q module is loaded, built in, or installed.
func (h LocalHost) VLANSupported() bool {
	root := h.SysRoot
	if root == "" {
		root = "/"
	}
	if _, err := os.Stat(filepath.Join(root, "sys/module/8021q")); err == nil {
		return true
	}
	if _, err := os.Stat(filepath.Join(root, "proc/net/vlan")); err == nil {
		return true
	}
	release, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease"))
	if err != nil {
		return false
	}
	dep, err := os.ReadFile(filepath.Join(root, "lib/modules", strings.TrimSpace(string(release)), "modules.dep"))
	return err == nil && strings.Contains(string(dep), "/8021q.ko")
}

func linkOf(ifi *net.Interface) Link {
	l := Link{Name: ifi.Name, Up: ifi.Flags&net.FlagUp != 0, MTU: ifi.MTU}
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				l.Addrs = append(l.Addrs, ip.Unmap())
			}
		}
	}
	return l
}
