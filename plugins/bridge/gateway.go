package bridge

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
)

// gateway is an address the bridge carries for its pods.
type gateway struct {
	addr *net.IPNet // gateway IP with the subnet's mask
}

// gateways fills in each IP configuration's gateway (the subnet's first
// address when IPAM named none), adds a default route per family when the
// bridge is the default gateway, and returns the bridge's gateway addresses.
// It mirrors the upstream bridge plugin.
func gateways(res *current.Result, isGW, isDefaultGW bool) ([]gateway, error) {
	if !isGW {
		return nil, nil
	}
	var out []gateway
	seen := map[string]bool{}
	defaults := map[bool]bool{} // family (is v4) -> default route present
	for _, r := range res.Routes {
		if r.GW != nil && isDefault(r.Dst) {
			defaults[r.Dst.IP.To4() != nil] = true
		}
	}
	for _, ipc := range res.IPs {
		if ipc.Address.IP == nil {
			return nil, fmt.Errorf("ipam returned an IP configuration without address")
		}
		v4 := ipc.Address.IP.To4() != nil
		if ipc.Gateway == nil {
			ipc.Gateway = ip.NextIP(ipc.Address.IP.Mask(ipc.Address.Mask))
		}
		if isDefaultGW && !defaults[v4] {
			res.Routes = append(res.Routes, &types.Route{Dst: defaultNet(v4), GW: ipc.Gateway})
			defaults[v4] = true
		}
		gw := &net.IPNet{IP: ipc.Gateway, Mask: ipc.Address.Mask}
		if !seen[gw.String()] {
			seen[gw.String()] = true
			out = append(out, gateway{addr: gw})
		}
	}
	return out, nil
}

func defaultNet(v4 bool) net.IPNet {
	if v4 {
		return net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

func isDefault(n net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}

// addresses are the pod's addresses with their masks: upstream's ipmasq
// masquerades traffic from each address that leaves its network.
func addresses(res *current.Result) []*net.IPNet {
	var out []*net.IPNet
	for _, ipc := range res.IPs {
		a := ipc.Address
		out = append(out, &a)
	}
	return out
}

func enableForwarding(res *current.Result) error {
	if err := ip.EnableForward(res.IPs); err != nil {
		return fmt.Errorf("enable ip forwarding: %w", err)
	}
	return nil
}

func masquerade(nets []*net.IPNet, network, ifname, containerID string) error {
	return ip.SetupIPMasqForNetworks(nil, nets, network, ifname, containerID)
}

func unmasquerade(nets []*net.IPNet, network, ifname, containerID string) error {
	return ip.TeardownIPMasqForNetworks(nets, network, ifname, containerID)
}
