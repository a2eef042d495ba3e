package vxlan

import (
	"fmt"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bwshare"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
)

// joinShare gives the attachment its class in the VNI's shared scheduler
// (c.BandwidthShare set), under the VNI lock; the undo takes it out.
func joinShare(c *netconf.VXLAN, res *current.Result, netns, hostIf string, undo *attach.Undo) error {
	s := c.BandwidthShare
	if s == nil {
		return nil
	}
	mac := ""
	for _, i := range res.Interfaces {
		if i.Sandbox == netns {
			mac = i.Mac
		}
	}
	if mac == "" {
		return fmt.Errorf("bandwidth share of %q: the result names no interface in the pod", hostIf)
	}
	p := bwshare.Port{HostIf: hostIf, MAC: mac, Rate: s.Guarantee, Ceil: s.CeilingOrGuarantee()}
	err := underLock(c, func() error { return bwshare.Join(c.DataDir, c.DeviceName(), s.Capacity, p) })
	if err != nil {
		return err
	}
	undo.Push(func() error { return leaveShare(c, hostIf) })
	return nil
}

// leaveShare takes the host end's class out of the VNI's shared scheduler
// (none is success), under the VNI lock.
func leaveShare(c *netconf.VXLAN, hostIf string) error {
	return underLock(c, func() error { return bwshare.Leave(c.DataDir, c.DeviceName(), hostIf) })
}

func underLock(c *netconf.VXLAN, fn func() error) error {
	unlock, err := vni.Lock(c)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}
