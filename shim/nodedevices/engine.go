// Package nodedevices is netclass-dra's node engine: it sets the node up for
// the networks offered on it and tears that down when they go (seed 001).
// For every netclass-vxlan network usable on the node it makes the VNI's
// VXLAN device and bridge exist, tagged as the node daemon's, with flood
// entries exactly the network's remotes — so pods already running reach a
// node that joins, and stop flooding to one that leaves, without being
// restarted; and it removes the devices of a network that is no longer
// offered once no pod uses them. The kernel work goes through plugins/vxlan/vni,
// under the same per-VNI lock as netclass-vxlan.
package nodedevices

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
	"github.com/netclass-dev/netclass/shim/network"
)

// Engine keeps the node's devices in line with the networks offered on it.
type Engine struct {
	// DataDir is the dataDir of the plugin configs netclass-dra renders:
	// the per-VNI locks netclass-vxlan takes live there.
	DataDir string
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
	wanted := map[string]bool{} // bridge names of offered VNIs
	var errs []error
	for _, n := range nets {
		if n.Type != netconf.TypeVXLAN {
			continue
		}
		c, err := netconf.ParseVXLAN(n.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("network %s: %w", n.Ref, err))
			continue
		}
		c.DataDir = e.DataDir
		wanted[c.BridgeName()] = true
		if err := e.ensure(c); err != nil {
			errs = append(errs, fmt.Errorf("devices of network %s: %w", n.Ref, err))
			continue
		}
		res.Devices[c.Name] = []string{c.BridgeName(), c.DeviceName()}
	}
	removed, err := e.removeUnwanted(ctx, wanted)
	res.Removed = removed
	return res, errors.Join(append(errs, err)...)
}

func (e *Engine) ensure(c *netconf.VXLAN) error {
	unlock, err := vni.Lock(c)
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

// removeUnwanted deletes the node-managed VNI devices of networks no longer
// offered, once no pod is a port of their bridge.
func (e *Engine) removeUnwanted(ctx context.Context, wanted map[string]bool) ([]string, error) {
	links, err := link.NodeManagedLinks()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	seen := map[int]bool{}
	for _, l := range links {
		id, ok := vniOf(l)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		c := &netconf.VXLAN{Common: netconf.Common{Name: link.NodeManagedOwner(l), DataDir: e.DataDir}, VNI: id}
		if wanted[c.BridgeName()] {
			continue
		}
		gone, err := e.remove(c)
		if err != nil {
			errs = append(errs, fmt.Errorf("remove devices of VNI %d: %w", id, err))
			continue
		}
		if gone {
			klog.FromContext(ctx).Info("Removed the node devices of a network that is gone", "vni", id, "bridge", c.BridgeName(), "vxlan", c.DeviceName())
			removed = append(removed, c.BridgeName(), c.DeviceName())
		}
	}
	return removed, errors.Join(errs...)
}

// remove deletes the VNI's devices if unused; gone says whether they are gone.
func (e *Engine) remove(c *netconf.VXLAN) (bool, error) {
	unlock, err := vni.Lock(c)
	if err != nil {
		return false, err
	}
	defer unlock()
	if err := vni.RemoveManagedIfUnused(c); err != nil {
		return false, err
	}
	_, err = link.ByName(c.BridgeName())
	return link.IsNotFound(err), nil
}

// vniOf reads the VNI of a node-managed VXLAN device or per-VNI bridge.
func vniOf(l netlink.Link) (int, bool) {
	name := l.Attrs().Name
	for _, prefix := range []string{"ncbr", "ncvx"} {
		if s, ok := strings.CutPrefix(name, prefix); ok {
			id, err := strconv.Atoi(s)
			return id, err == nil && id > 0 && id <= netconf.MaxVNI
		}
	}
	return 0, false
}
