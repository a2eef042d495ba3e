// Package bridgeport attaches a pod to a host bridge with a veth pair: the
// part netclass-bridge, netclass-vxlan and netclass-vlan (bridged mode)
// share. It creates, configures, checks and removes the pair; the plugins
// own the bridge around it.
package bridgeport

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// settleTimeout bounds the wait for IPv6 duplicate address detection.
const settleTimeout = 10 * time.Second

// Port is one pod interface joined to a host bridge.
type Port struct {
	ContainerID string
	NetNS       string // path of the pod's namespace
	IfName      string // interface name inside the pod
	BridgeIndex int
	MTU         int
	MAC         net.HardwareAddr // pod end; nil: kernel-chosen
	Hairpin     bool
}

// HostVethName is the host end's name: derived from the attachment so a DEL
// without a record still finds it, and short enough for IFNAMSIZ.
func HostVethName(containerID, ifname string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifname))
	return "nc" + hex.EncodeToString(sum[:])[:11]
}

// HostName is the host end of this port.
func (p Port) HostName() string { return HostVethName(p.ContainerID, p.IfName) }

// Create makes the veth pair, the host end up and enslaved to the bridge,
// the pod end (down, unaddressed) in the pod's namespace.
func (p Port) Create() (host netlink.Link, err error) {
	pod, err := netns.Open(p.NetNS)
	if err != nil {
		return nil, err
	}
	defer pod.Close()
	host, err = link.CreateVeth(link.VethPair{
		HostName: p.HostName(), PodName: p.IfName, PodNSFd: int(pod.Fd()),
		MTU: p.MTU, PodMAC: p.MAC, MasterIndex: p.BridgeIndex,
		Alias: "netclass " + p.ContainerID + "/" + p.IfName,
	})
	if err != nil {
		return nil, err
	}
	if p.Hairpin {
		if err := link.SetHairpin(host); err != nil {
			return host, err
		}
	}
	return host, nil
}

// Created reports whether Create made something to remove: a pair, or a
// partial one. A name already taken (EEXIST) in the pod or on the host
// means nothing was made, and the existing link is not ours to delete.
func Created(host netlink.Link, err error) bool {
	return host != nil || (err != nil && !errors.Is(err, syscall.EEXIST))
}

// Configure brings the pod end up with the result's addresses and routes
// (after Interfaces prepared the result), and returns it. IPv6 addresses are waited for until usable.
func (p Port) Configure(res *current.Result) (podLink netlink.Link, err error) {
	err = netns.Do(p.NetNS, func() error {
		if err := ipam.ConfigureIface(p.IfName, res); err != nil {
			return fmt.Errorf("configure %q: %w", p.IfName, err)
		}
		for _, ipc := range res.IPs {
			if ipc.Address.IP.To4() == nil {
				if err := ip.SettleAddresses(p.IfName, settleTimeout); err != nil {
					return fmt.Errorf("wait for ipv6 addresses of %q: %w", p.IfName, err)
				}
				break
			}
		}
		podLink, err = link.ByName(p.IfName)
		return err
	})
	if err == nil && len(res.Interfaces) > PodInterface {
		res.Interfaces[PodInterface].Mac = podLink.Attrs().HardwareAddr.String()
	}
	return podLink, err
}

// Remove deletes the pair and returns the addresses the pod end had (for
// masquerade teardown). A pair or namespace that is gone is success.
func (p Port) Remove() ([]*net.IPNet, error) {
	var addrs []*net.IPNet
	err := netns.Do(p.NetNS, func() error {
		var err error
		addrs, err = ip.DelLinkByNameAddr(p.IfName)
		if err != nil && errors.Is(err, ip.ErrLinkNotFound) {
			return nil
		}
		return err
	})
	if err != nil && !errors.Is(err, netns.ErrNotFound) {
		return nil, fmt.Errorf("delete %q in %s: %w", p.IfName, p.NetNS, err)
	}
	// Without the namespace (or if the pod end was moved away) the host end
	// may remain.
	return addrs, link.Delete(p.HostName())
}

// RemoveDevices deletes the port's devices — the veth pair and what shares
// the host end's link group, its egress IFB — in one request, so that the
// kernel waits once for all of them (link.DeletePort). A port made before
// the groups, or already gone, is left to Remove and the QoS teardown, which
// delete device by device. Teardowns call it before anything else.
func (p Port) RemoveDevices() error {
	_, err := link.DeletePort(p.HostName())
	return err
}

// Teardown deletes the port's devices (RemoveDevices) while rules runs —
// the port's nftables teardown, whose deleting transaction makes the kernel
// wait for an RCU grace period as unregistering the devices does, so the
// two waits overlap — and then runs after, the steps that must not precede
// the devices' removal (a guard or spoof check taken away first would let
// the port's frames through unchecked while it still exists). The QoS rules
// are no guard: the last frames of a port being deleted, in the few
// milliseconds before its devices go, may pass unmarked and unmetered.
func (p Port) Teardown(rules func() error, after ...func() error) error {
	return overlap(rules, p.RemoveDevices, after)
}

// overlap runs rules beside removeDevices, then after once removeDevices
// succeeded, and returns every error.
func overlap(rules, removeDevices func() error, after []func() error) error {
	return attach.Parallel(rules, func() error {
		if err := removeDevices(); err != nil {
			return err
		}
		return attach.Parallel(after...)
	})
}

// Interfaces sets the result's interface list to bridge, host end and pod
// end, and points every IP configuration at the pod end, as ConfigureIface
// and the upstream bridge plugin expect. The pod end's MAC is filled in by
// Configure.
func Interfaces(res *current.Result, bridge, host netlink.Link, podIf, netnsPath string) {
	res.Interfaces = []*current.Interface{
		{Name: bridge.Attrs().Name, Mac: bridge.Attrs().HardwareAddr.String()},
		{Name: host.Attrs().Name, Mac: host.Attrs().HardwareAddr.String()},
		{Name: podIf, Sandbox: netnsPath},
	}
	for _, ipc := range res.IPs {
		ipc.Interface = current.Int(PodInterface)
	}
}

// PodInterface is the index of the pod end in the result's interfaces.
const PodInterface = 2
