package bridgeport

import (
	"cmp"
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// Check verifies the pair against a previous result: the pod end exists with
// its MAC, addresses and routes, and the host end is its peer and still a
// port of the bridge; both ends are up.
func (p Port) Check(prev *current.Result) error {
	var podIf *current.Interface
	for _, i := range prev.Interfaces {
		if i.Name == p.IfName && i.Sandbox != "" {
			podIf = i
		}
	}
	if podIf == nil {
		return fmt.Errorf("prevResult has no interface %q in a sandbox", p.IfName)
	}
	var peerIndex int
	err := netns.Do(p.NetNS, func() error {
		l, err := link.ByName(p.IfName)
		if err != nil {
			return err
		}
		if podIf.Mac != "" && l.Attrs().HardwareAddr.String() != podIf.Mac {
			return fmt.Errorf("%q has MAC %s, want %s", p.IfName, l.Attrs().HardwareAddr, podIf.Mac)
		}
		if l.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("%q is down", p.IfName)
		}
		peerIndex = link.VethPeer(l)
		if err := ip.ValidateExpectedInterfaceIPs(p.IfName, prev.IPs); err != nil {
			return err
		}
		return ip.ValidateExpectedRoute(prev.Routes)
	})
	if err != nil {
		return fmt.Errorf("check %q in %s: %w", p.IfName, p.NetNS, err)
	}
	host, err := link.ByName(p.HostName())
	if err != nil {
		return err
	}
	if linked, err := link.LinksTo(host, p.NetNS); err != nil || !linked { // an index is its namespace's
		return cmp.Or(err, fmt.Errorf("%q is not the peer of %q", p.HostName(), p.IfName))
	}
	switch {
	case host.Attrs().Index != peerIndex:
		return fmt.Errorf("%q is not the peer of %q", p.HostName(), p.IfName)
	case host.Attrs().MasterIndex != p.BridgeIndex:
		return fmt.Errorf("%q is no longer a port of its bridge", p.HostName())
	case host.Attrs().OperState == 2: // IF_OPER_DOWN
		return fmt.Errorf("%q is down", p.HostName())
	}
	return nil
}
