// Package qoschain is netclass-qos, the chained plugin: it applies the qos
// block to the interface an earlier plugin of the chain created (upstream
// bridge, macvlan, vlan, host-device, sriov...), on any interface type, and
// passes the previous result through unchanged.
package qoschain

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

func store(c *netconf.QoSChain) attach.Store { return attach.Store{Dir: c.DataDir} }

func cmdAdd(args *skel.CmdArgs) error {
	c, prev, err := parseChained(args)
	if err != nil {
		return err
	}
	if c.EffectiveQoS != nil {
		if err := add(c, args, prev); err != nil {
			return attach.Internal(err, nil)
		}
	}
	return attach.Print(prev, c.CNIVersion)
}

func add(c *netconf.QoSChain, args *skel.CmdArgs, prev *current.Result) error {
	hostIf, err := hostPeer(args.Netns, args.IfName, prev)
	if err != nil {
		return err
	}
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeQoS, ContainerID: args.ContainerID,
		IfName: args.IfName, NetNS: args.Netns, HostIf: hostIf, Config: c.Raw}
	rec.Addressed(prev)
	if err := store(c).Put(rec); err != nil {
		return err
	}
	a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName, HostIf: hostIf}
	if err := qosport.Apply(a, qos.Compile(c.EffectiveQoS)); err != nil {
		return errors.Join(err, store(c).Delete(c.Name, args.ContainerID, args.IfName))
	}
	return nil
}

func parseChained(args *skel.CmdArgs) (*netconf.QoSChain, *current.Result, error) {
	c, err := netconf.ParseQoSChain(args.StdinData)
	if err != nil {
		return nil, nil, err
	}
	prev, err := attach.PrevResult(c.CNIVersion, c.RawPrevResult)
	if err != nil {
		return nil, nil, err
	}
	if err := attach.UsableNetNS(args.Netns); err != nil {
		return nil, nil, err
	}
	for _, i := range prev.Interfaces {
		if i.Name == args.IfName && i.Sandbox != "" {
			return c, prev, nil
		}
	}
	return nil, nil, attach.Invalid("prevResult: no interface %q in a sandbox: netclass-qos must follow the plugin that creates it", args.IfName)
}

// hostPeer returns the host end of the pod interface when it is a veth whose
// peer is in this namespace and listed in the previous result; "" otherwise.
func hostPeer(netnsPath, ifname string, prev *current.Result) (string, error) {
	host, err := qosport.HostEnd(netnsPath, ifname)
	if err != nil || host == "" || !listedOnHost(prev, host) {
		return "", err
	}
	return host, nil
}

func listedOnHost(prev *current.Result, name string) bool {
	for _, i := range prev.Interfaces {
		if i.Name == name && i.Sandbox == "" {
			return true
		}
	}
	return false
}

func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseQoSChain(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).Get(c.Name, args.ContainerID, args.IfName)
	if err != nil {
		return attach.Internal(err, nil)
	}
	if err := remove(c, args.ContainerID, args.IfName, args.Netns, rec); err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}

// remove undoes ADD; with no record (ADD never applied QoS, or DEL runs
// twice) it still removes whatever pod-side state exists.
func remove(c *netconf.QoSChain, containerID, ifname, netnsPath string, rec *attach.Record) error {
	a := qosport.Attachment{PodNS: netnsPath, IfName: ifname}
	if rec != nil {
		a.HostIf = rec.HostIf
		if a.PodNS == "" {
			a.PodNS = rec.NetNS
		}
	}
	if err := qosport.Remove(a); err != nil {
		return fmt.Errorf("remove qos of %s/%s: %w", containerID, ifname, err)
	}
	return store(c).Delete(c.Name, containerID, ifname)
}

func cmdCheck(args *skel.CmdArgs) error {
	c, prev, err := parseChained(args)
	if err != nil {
		return err
	}
	if c.EffectiveQoS == nil {
		return nil
	}
	hostIf, err := hostPeer(args.Netns, args.IfName, prev)
	if err != nil {
		return attach.Internal(err, nil)
	}
	a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName, HostIf: hostIf}
	if err := qosport.Check(a, qos.Compile(c.EffectiveQoS)); err != nil {
		return attach.Internal(fmt.Errorf("qos of %q: %w", args.IfName, err), nil)
	}
	return nil
}

func cmdGC(args *skel.CmdArgs) error {
	c, err := netconf.ParseQoSChain(args.StdinData)
	if err != nil {
		return err
	}
	return attach.GC(context.Background(), store(c), c.Name, c.ValidAttachments, attach.IPAM{}, func(r *attach.Record) error {
		return remove(c, r.ContainerID, r.IfName, r.NetNS, r)
	})
}

// cmdStatus: netclass-qos needs nothing beyond the kernel to serve ADDs.
func cmdStatus(args *skel.CmdArgs) error {
	_, err := netconf.ParseQoSChain(args.StdinData)
	return err
}
