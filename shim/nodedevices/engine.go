// Package nodedevices is netclass-dra's node engine: it sets the node up for
// the networks offered on it and tears that down when they go (the engine model).
// For every netclass-vxlan network usable on the node it makes the VNI's
// VXLAN device and bridge exist, tagged as the node daemon's, with flood
// entries exactly the network's remotes — so pods already running reach a
// node that joins, and stop flooding to one that leaves, without being
// restarted; for every netclass-vlan network (but linkInContainer ones,
// whose master is inside the pod) the VLAN's sub-interface of master and
// bridge. It removes the devices of a network that is no longer offered
// once no pod uses them. The kernel work goes through plugins/vxlan/vni and
// plugins/vlan/trunk, under the same per-segment locks as the plugins: the
// segment's lock in every dataDir whose plugins join its devices.
package nodedevices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/segment"
	"github.com/netclass-dev/netclass/plugins/vlan/trunk"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
	"github.com/netclass-dev/netclass/shim/network"
)

// Engine keeps the node's devices in line with the networks offered on it.
type Engine struct {
	// DataDirs are the dataDirs of the plugin configs netclass-dra renders
	// (its claims' and its generated NADs'): the plugins of each take a
	// segment's lock there, so the engine takes it in every one, in this
	// order (a plugin holds one only: they cannot deadlock), and removes
	// every one's file with the devices.
	DataDirs []string
	// own is, by bridge, the dataDir a network's config names beyond
	// DataDirs (an admin's PodNetwork may name its own): its plugins lock
	// there, so the engine does too, until it removes the bridge.
	own map[string]string
	// StateFile keeps own across restarts ("": in memory only): a network
	// gone while netclass-dra was down still has its devices removed
	// under, and its lock file removed from, the dataDir it named.
	StateFile string
	// saved is own as StateFile holds it; loaded: StateFile was read.
	saved  map[string]string
	loaded bool
}

// Result is what one Sync found and did.
type Result struct {
	// Devices are the node devices of each offered network (CNI name).
	Devices map[string][]string
	// Removed are the devices deleted because their network is gone.
	Removed []string
}

// Sync makes the node's devices what nets need. A network whose devices
// cannot be made is reported in the error and does not stop the others.
func (e *Engine) Sync(ctx context.Context, nets []network.Network) (Result, error) {
	res := Result{Devices: map[string][]string{}}
	wanted := map[string]bool{} // bridge names of offered segments
	errs := []error{e.load()}
	for _, n := range nets {
		d, err := e.ensure(n)
		if d != nil {
			wanted[d.Bridge] = true
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("devices of network %s: %w", n.Ref, err))
			continue
		}
		if d != nil {
			res.Devices[d.Network] = []string{d.Bridge, d.Uplink}
		}
	}
	removed, err := e.removeUnwanted(ctx, wanted)
	res.Removed = removed
	return res, errors.Join(append(errs, err, e.save())...)
}

// ensure makes n's node devices exist and returns them; nil for a network
// without node devices.
func (e *Engine) ensure(n network.Network) (*segment.Devices, error) {
	switch n.Type {
	case netconf.TypeVXLAN:
		c, err := netconf.ParseVXLAN(n.Config)
		if err != nil {
			return nil, err
		}
		d := vni.Devices(c)
		e.remember(d.Bridge, n.Config)
		d.Locks = e.locks(d.Bridge, func(dir string) attach.LockFile { return vni.LockFile(dir, c.VNI) })
		return &d, ensureVXLAN(c, d.Locks)
	case netconf.TypeVLAN:
		c, err := netconf.ParseVLAN(n.Config)
		if err != nil || c.LinkInContainer {
			return nil, err
		}
		d := trunk.Devices(c)
		e.remember(d.Bridge, n.Config)
		d.Locks = e.locks(d.Bridge, func(dir string) attach.LockFile { return trunk.BridgeLock(dir, d.Bridge) })
		return &d, ensureVLAN(c, d.Locks)
	}
	return nil, nil
}

// remember notes the dataDir config, bridge's network's, names (none: its
// plugins use the default, which DataDirs holds in netclass-dra).
func (e *Engine) remember(bridge string, config []byte) {
	var named struct {
		DataDir string `json:"dataDir"`
	}
	if json.Unmarshal(config, &named) != nil || named.DataDir == "" {
		delete(e.own, bridge)
		return
	}
	if e.own == nil {
		e.own = map[string]string{}
	}
	e.own[bridge] = named.DataDir
}

// locks is the lock of bridge's segment in each of the engine's dataDirs,
// in order, then in the one its network's config names, once each (a
// second flock of one file by its holder would wait forever).
func (e *Engine) locks(bridge string, in func(dataDir string) attach.LockFile) attach.Locks {
	ls := make(attach.Locks, 0, len(e.DataDirs)+1)
	seen := map[string]bool{}
	for _, dir := range append(slices.Clip(e.DataDirs), e.own[bridge]) {
		if dir == "" {
			continue // no dataDir of its own known
		}
		if dir = filepath.Clean(dir); !seen[dir] {
			seen[dir] = true
			ls = append(ls, in(dir))
		}
	}
	return ls
}

func ensureVXLAN(c *netconf.VXLAN, locks attach.Locks) error {
	unlock, err := locks.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	u, err := vni.ResolveUnderlay(c)
	if err != nil {
		return err
	}
	if _, err := vni.Ensure(c, u, true); err != nil {
		return err
	}
	if c.Group != "" {
		return nil // multicast floods through the underlay: no entries
	}
	return vni.SyncFlood(c)
}

func ensureVLAN(c *netconf.VLAN, locks attach.Locks) error {
	unlock, err := locks.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	u, err := trunk.Resolve(c)
	if err != nil {
		return err
	}
	_, err = trunk.Ensure(c, u, true)
	return err
}

// removeUnwanted deletes the node-managed devices of segments no longer
// offered, once no pod is a port of their bridge.
func (e *Engine) removeUnwanted(ctx context.Context, wanted map[string]bool) ([]string, error) {
	links, err := link.NodeManagedLinks()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	seen := map[string]bool{}
	for _, l := range links {
		d, ok := e.segmentOf(l)
		if !ok || seen[d.Bridge] || wanted[d.Bridge] {
			continue
		}
		seen[d.Bridge] = true
		gone, err := remove(d)
		if err != nil {
			errs = append(errs, fmt.Errorf("remove devices of bridge %q: %w", d.Bridge, err))
			continue
		}
		if gone {
			delete(e.own, d.Bridge)
			klog.FromContext(ctx).Info("Removed the node devices of a network that is gone", "network", d.Network, "bridge", d.Bridge, "uplink", d.Uplink)
			removed = append(removed, d.Bridge, d.Uplink)
		}
	}
	for bridge := range e.own {
		if !wanted[bridge] && !seen[bridge] {
			delete(e.own, bridge) // its devices went without the engine (a reboot)
		}
	}
	return removed, errors.Join(errs...)
}

// remove deletes the segment's devices if unused; gone says whether they are gone.
func remove(d segment.Devices) (bool, error) {
	unlock, err := d.Locks.Lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	if err := d.RemoveManagedIfUnused(); err != nil {
		return false, err
	}
	_, err = link.ByName(d.Bridge)
	return link.IsNotFound(err), nil
}

// segmentOf reads, from a node-managed device's name, the segment it belongs
// to, with the locks the plugins take for it.
func (e *Engine) segmentOf(l netlink.Link) (segment.Devices, bool) {
	name, owner := l.Attrs().Name, link.NodeManagedOwner(l)
	for _, prefix := range []string{"ncbr", "ncvx"} {
		if s, ok := strings.CutPrefix(name, prefix); ok {
			id, err := strconv.Atoi(s)
			if err != nil || id <= 0 || id > netconf.MaxVNI {
				return segment.Devices{}, false
			}
			d := vni.Devices(&netconf.VXLAN{Common: netconf.Common{Name: owner}, VNI: id})
			d.Locks = e.locks(d.Bridge, func(dir string) attach.LockFile { return vni.LockFile(dir, id) })
			return d, true
		}
	}
	bridge, uplink, ok := netconf.VLANDevicesOf(name)
	if !ok {
		return segment.Devices{}, false
	}
	locks := e.locks(bridge, func(dir string) attach.LockFile { return trunk.BridgeLock(dir, bridge) })
	return segment.Devices{Bridge: bridge, Uplink: uplink, Network: owner, Locks: locks}, true
}
