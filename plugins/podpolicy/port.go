package podpolicy

import (
	"errors"
	"fmt"
	"net"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// place is where an interface's policy lives: on the host end of its port
// (hostIf set) or in its pod.
type place struct {
	hostIf string
	host   int // the host end's index
	bridge netlink.Link
	mac    net.HardwareAddr
	// podTable: the pod still holds a policy table of an older netclass,
	// which goes once the port holds the policy.
	podTable bool
}

// locate finds where the interface's policy lives: where f.Port says when
// the host still has it there, else from the pod's interface. bridges are
// the bridges already read in this sync, by index.
func locate(f Interface, bridges map[int]netlink.Link) (place, error) {
	if p, ok := located(f, bridges); ok {
		return p, nil
	}
	host, err := qosport.HostLink(f.PodNS, f.IfName)
	if err != nil || host == nil {
		return place{}, err
	}
	br, ok, err := link.BridgeOfLink(host)
	if err != nil || !ok {
		return place{}, err
	}
	p := place{hostIf: host.Attrs().Name, host: host.Attrs().Index, bridge: br, mac: f.MAC}
	if p.mac == nil {
		err = netns.Do(f.PodNS, func() error {
			l, err := link.ByName(f.IfName)
			if err == nil {
				p.mac = l.Attrs().HardwareAddr
			}
			return err
		})
	}
	if err == nil && f.Prev == nil {
		err = nft.InNamespace(f.PodNS, func(c *nftables.Conn) (err error) {
			p.podTable, err = nft.HasPolicy(c, f.IfName)
			return err
		})
	}
	if err != nil {
		return place{}, fmt.Errorf("interface %q of %s: %w", f.IfName, f.PodNS, err)
	}
	return p, nil
}

// port is the Port a sync reports for a place on a host port.
func (p place) port() *Port {
	return &Port{HostIf: p.hostIf, HostIndex: p.host, BridgeIndex: p.bridge.Attrs().Index}
}

// located is the place f.Port records, when the interface held its plan
// (Prev) and the host still has the port: a veth of that index and name
// (an attachment made again gets a new index), a port of the same bridge.
// It costs one netlink call, where locating from the pod costs entering
// its namespace and several calls and sockets: an edit syncs every port
// it changes.
func located(f Interface, bridges map[int]netlink.Link) (place, bool) {
	r := f.Port
	if r == nil || f.Prev == nil || f.MAC == nil {
		return place{}, false
	}
	l, err := link.ByIndex(r.HostIndex)
	if err != nil || l.Attrs().Name != r.HostIf || l.Attrs().MasterIndex != r.BridgeIndex || link.VethPeer(l) == 0 {
		return place{}, false
	}
	br, ok := bridges[r.BridgeIndex]
	if !ok {
		if br, ok, err = link.BridgeOfLink(l); err != nil || !ok {
			return place{}, false
		}
		bridges[r.BridgeIndex] = br
	}
	return place{hostIf: r.HostIf, host: r.HostIndex, bridge: br, mac: f.MAC}, true
}

// syncPorts brings the policies of bridged ports to their plans on the
// host, makes sure each port is guarded (an attachment of an older netclass
// was made without), and opens the ports whose policy is in place.
func syncPorts(ifs []Interface, where []place, idx []int, out []Result) {
	c, err := nft.OpenCurrent()
	if err != nil {
		for _, i := range idx {
			out[i].Err = err
		}
		return
	}
	ports := map[string]nft.HostPort{}
	at := map[string]int{}
	bridges := bridgesOf(c, where, idx) // each bridge's netfilter and zone, set once
	for _, i := range idx {
		w := where[i]
		if err := bridges[w.bridge.Attrs().Index]; err != nil {
			out[i].Err = fmt.Errorf("policy of %q on %q: %w", ifs[i].IfName, w.hostIf, err)
			continue
		}
		ports[w.hostIf], at[w.hostIf] = nft.HostPort{Bridge: w.bridge.Attrs().Name, MAC: w.mac, Addrs: ifs[i].IPs, Plan: ifs[i].Plan, Prev: ifs[i].Prev}, i
	}
	guarded, gerr := nft.GuardedPorts(c)
	var open []string
	for h, r := range nft.SyncHostPolicies(c, ports) {
		i := at[h]
		out[i].Changed, out[i].At = r.Changed, r.At
		if r.Err != nil {
			out[i].Err = fmt.Errorf("policy of %q on %q: %w", ifs[i].IfName, h, r.Err)
			continue
		}
		if changed, err := ensureGuard(c, ifs[i], h, guarded, gerr); err != nil {
			out[i].Err = err
			continue
		} else if changed {
			out[i].Changed = true
		}
		out[i].Port = where[i].port()
		open = append(open, h)
	}
	if err := nft.OpenGuard(c, open...); err != nil {
		for _, h := range open {
			out[at[h]].Err = err
		}
		return
	}
	dropPodTables(ifs, where, open, at, out)
}

// TidyGuard takes the ports opened since they were closed out of the host
// guard's sets (nft.TidyGuard): opening only adds, to stay off the
// deleting transactions' wait on a pod's start; this runs after. The host
// is the calling thread's network namespace.
func TidyGuard() error {
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.TidyGuard(c)
}

// ensureGuard installs the port's guard when it has none.
func ensureGuard(c *nftables.Conn, f Interface, hostIf string, guarded map[string]bool, readErr error) (bool, error) {
	if readErr != nil {
		return false, readErr
	}
	if guarded[hostIf] {
		return false, nil
	}
	g, err := portguard.GuardOf(portguard.Port{PodNS: f.PodNS, IfName: f.IfName, HostIf: hostIf}, f.IPs)
	if err == nil {
		err = nft.InstallGuard(c, hostIf, g, false)
	}
	if err != nil {
		return false, fmt.Errorf("guard port %q of %q: %w", hostIf, f.IfName, err)
	}
	return true, nil
}

// dropPodTables removes the policy tables an older netclass left in the
// pods of ports that now hold their policy on the host.
func dropPodTables(ifs []Interface, where []place, open []string, at map[string]int, out []Result) {
	var todo []int
	for _, h := range open {
		if i := at[h]; where[i].podTable {
			todo = append(todo, i)
		}
	}
	parallel(len(todo), func(j int) {
		i := todo[j]
		err := nft.InNamespace(ifs[i].PodNS, func(c *nftables.Conn) error {
			_, err := nft.DeletePolicy(c, ifs[i].IfName)
			return err
		})
		if err != nil {
			out[i].Err = errors.Join(out[i].Err, fmt.Errorf("remove the pod's old policy table of %q: %w", ifs[i].IfName, err))
		}
		out[i].Changed = true
	})
}

// syncInPod brings the policy table of an interface without a host port,
// in its pod's namespace, to its plan, then opens the interface's guard.
func syncInPod(f Interface) (changed bool, err error) {
	err = nft.InNamespace(f.PodNS, func(c *nftables.Conn) error {
		if changed, err = nft.SyncPolicy(c, f.IfName, f.Plan); err != nil {
			return err
		}
		opened, err := nft.OpenPodGuard(c, f.IfName)
		changed = changed || opened
		return err
	})
	if err != nil {
		return changed, fmt.Errorf("policy of %q: %w", f.IfName, err)
	}
	return changed, nil
}

// Check verifies that the interface holds its plan wherever its policy
// lives (a port's: on the host, its port guarded and open; the host is
// the calling thread's namespace).
func Check(f Interface) error {
	f.Port = nil // found from the pod, whatever a sync recorded
	w, err := locate(f, map[int]netlink.Link{})
	if err != nil {
		return err
	}
	if w.hostIf == "" {
		return nft.InNamespace(f.PodNS, func(c *nftables.Conn) error {
			if closed, err := nft.PodGuardClosed(c, f.IfName); err != nil || closed {
				return errors.Join(err, fmt.Errorf("%q is still closed", f.IfName))
			}
			return nft.CheckPolicy(c, f.IfName, f.Plan)
		})
	}
	if w.podTable {
		return fmt.Errorf("the pod of %q still holds a policy table, its policy is on the host", f.IfName)
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	closed, err := nft.GuardClosed(c)
	if err != nil {
		return err
	}
	guarded, err := nft.GuardedPorts(c)
	if err != nil {
		return err
	}
	if closed[w.hostIf] || !guarded[w.hostIf] {
		return fmt.Errorf("port %q of %q: closed %v, guarded %v; want open and guarded", w.hostIf, f.IfName, closed[w.hostIf], guarded[w.hostIf])
	}
	return nft.CheckHostPolicy(c, w.hostIf, nft.HostPort{Bridge: w.bridge.Attrs().Name, MAC: w.mac, Addrs: f.IPs, Plan: f.Plan})
}
