package sriov

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// settleTimeout bounds the wait for IPv6 duplicate address detection.
const settleTimeout = 10 * time.Second

// netdevState is a VF netdev's identity in the host namespace, which DEL
// puts back.
type netdevState struct {
	Name  string `json:"name"`
	MTU   int    `json:"mtu"`
	MAC   string `json:"mac"`
	Up    bool   `json:"up"`
	Alias string `json:"alias,omitempty"`
}

func snapshotNetdev(name string) (*netdevState, error) {
	l, err := link.ByName(name)
	if err != nil {
		return nil, err
	}
	a := l.Attrs()
	return &netdevState{Name: a.Name, MTU: a.MTU, MAC: a.HardwareAddr.String(), Up: a.Flags&net.FlagUp != 0, Alias: a.Alias}, nil
}

// mark is the alias a VF netdev carries while attached: what tells it from
// a link of the pod's own under the same name.
func mark(pci string) string { return "netclass VF " + pci }

// travelName is the VF netdev's name while it moves between namespaces:
// derived from its PCI address, so DEL finds it wherever a move stopped,
// and never the name of anything else.
func travelName(pci string) string {
	sum := sha256.Sum256([]byte(pci))
	return "ncvf" + hex.EncodeToString(sum[:])[:11]
}

// podIf is the VF netdev as the pod gets it.
type podIf struct {
	NetNS  string
	IfName string
	MTU    int              // 0: keep
	MAC    net.HardwareAddr // nil: keep
}

// moveIn marks the host netdev, moves it into the pod under its travel
// name, then names it, and sets its MTU and MAC there (it stays down).
func moveIn(hostName, pci string, pod podIf) error {
	ns, err := netns.Open(pod.NetNS)
	if err != nil {
		return err
	}
	defer ns.Close()
	l, err := link.ByName(hostName)
	if err != nil {
		return err
	}
	if err := link.Down(l); err != nil {
		return err
	}
	if err := link.SetAlias(l, mark(pci)); err != nil {
		return err
	}
	if err := link.Rename(l, travelName(pci)); err != nil {
		return err
	}
	if err := link.MoveToNS(l, int(ns.Fd())); err != nil {
		return err
	}
	return netns.Do(pod.NetNS, func() error {
		l, err := link.ByName(travelName(pci))
		if err != nil {
			return err
		}
		if err := link.Rename(l, pod.IfName); err != nil {
			return err
		}
		if pod.MTU != 0 {
			if err := link.SetMTU(l, pod.MTU); err != nil {
				return err
			}
		}
		if pod.MAC != nil {
			return link.SetMAC(l, pod.MAC)
		}
		return nil
	})
}

// configure brings the pod's interface up with its addresses and routes,
// waits for IPv6 addresses to be usable, and completes the result's
// interface with its MAC and MTU.
func configure(pod podIf, res *current.Result) error {
	return netns.Do(pod.NetNS, func() error {
		if len(res.IPs) > 0 {
			if err := ipam.ConfigureIface(pod.IfName, res); err != nil {
				return fmt.Errorf("configure %q: %w", pod.IfName, err)
			}
		}
		l, err := link.ByName(pod.IfName)
		if err != nil {
			return err
		}
		if err := link.Up(l); err != nil {
			return err
		}
		if hasV6(res) {
			if err := ip.SettleAddresses(pod.IfName, settleTimeout); err != nil {
				return fmt.Errorf("wait for ipv6 addresses of %q: %w", pod.IfName, err)
			}
		}
		res.Interfaces[0].Mac, res.Interfaces[0].Mtu = l.Attrs().HardwareAddr.String(), l.Attrs().MTU
		return nil
	})
}

func hasV6(res *current.Result) bool {
	for _, ipc := range res.IPs {
		if ipc.Address.IP.To4() == nil {
			return true
		}
	}
	return false
}

// moveOut brings the VF netdev of an attachment back from the pod (found by
// its mark, whatever its name there, never a link of the pod's own) and
// gives it its host identity again. A pod namespace or netdev that is gone
// is success: a VF's netdev returns to the host by itself when its
// namespace goes, and is found through sysfs.
func (p plugin) moveOut(netnsPath string, st *state) error {
	host, err := netns.Current()
	if err != nil {
		return err
	}
	defer host.Close()
	err = netns.Do(netnsPath, func() error {
		l, err := marked(st.PCI)
		if err != nil || l == nil {
			return err
		}
		return leavePod(l, travelName(st.PCI), int(host.Fd()))
	})
	if err != nil && !errors.Is(err, netns.ErrNotFound) {
		return fmt.Errorf("move VF %s out of %s: %w", st.PCI, netnsPath, err)
	}
	return p.restoreNetdev(st)
}

// marked returns the link of the calling thread's namespace that carries
// the VF's mark, or nil.
func marked(pci string) (netlink.Link, error) {
	links, err := link.List()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if l.Attrs().Alias == mark(pci) {
			return l, nil
		}
	}
	return nil, nil
}

func leavePod(l netlink.Link, travel string, hostFd int) error {
	if err := link.Down(l); err != nil {
		return err
	}
	if l.Attrs().Name != travel {
		if err := link.Rename(l, travel); err != nil {
			return err
		}
	}
	return link.MoveToNS(l, hostFd)
}

// restoreNetdev finds the VF's netdev on the host (under its travel name,
// or as sysfs names it now) and puts its name, MTU, MAC and state back.
func (p plugin) restoreNetdev(st *state) error {
	names := []string{travelName(st.PCI)}
	if vf, err := p.sys.VF(st.PCI); err == nil {
		names = append(names, vf.Netdevs...)
	}
	for _, n := range names {
		l, err := link.ByName(n)
		switch {
		case link.IsNotFound(err):
			continue
		case err != nil:
			return err
		case n != st.Netdev.Name && l.Attrs().Alias != mark(st.PCI):
			continue // a link of that name, but not the VF's netdev
		}
		// Its qdiscs did not come along: a move between namespaces resets them.
		return setIdentity(l, st.Netdev)
	}
	return nil // the VF is gone (or its stand-in went with the pod)
}

func setIdentity(l netlink.Link, want *netdevState) error {
	a := l.Attrs()
	if a.Name != want.Name {
		if err := link.Down(l); err != nil {
			return err
		}
		if err := link.Rename(l, want.Name); err != nil {
			return err
		}
	}
	if a.MTU != want.MTU {
		if err := link.SetMTU(l, want.MTU); err != nil {
			return err
		}
	}
	if mac, err := net.ParseMAC(want.MAC); err == nil && a.HardwareAddr.String() != mac.String() {
		if err := link.SetMAC(l, mac); err != nil {
			return err
		}
	}
	if a.Alias != want.Alias {
		if err := link.SetAlias(l, want.Alias); err != nil {
			return err
		}
	}
	if want.Up {
		return link.Up(l)
	}
	return link.Down(l)
}
