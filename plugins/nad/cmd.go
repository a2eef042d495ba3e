package nad

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/plugins/attach"
)

func cmdAdd(args *skel.CmdArgs) error {
	c, err := newCall(args)
	if err != nil {
		return err
	}
	if len(c.conf.PrevResult) > 0 && string(c.conf.PrevResult) != "null" {
		return types.NewError(types.ErrInvalidNetworkConfig, "netclass-nad: prevResult: netclass-nad must be the first plugin of its configuration (its delegates make the interface)", "")
	}
	if err := c.podMayUse(); err != nil {
		return err
	}
	if err := c.underLimit(); err != nil {
		return err
	}
	list, err := c.current()
	if err != nil {
		return err
	}
	if list == nil {
		return errNotOffered(c.conf, types.ErrTryAgainLater)
	}
	if err := c.staticAllowed(list); err != nil {
		return err
	}
	res, err := c.cni.AddNetworkList(context.Background(), list, c.rt)
	if err != nil {
		return c.delegated("ADD", err)
	}
	out, err := res.GetAsVersion(c.conf.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "netclass-nad: result", err.Error())
	}
	return types.PrintResult(out, c.conf.CNIVersion)
}

// attached is the list the attachment was added with, else the current one
// (nil: neither, nothing of ours to act on).
func (c *call) attached() (*libcni.NetworkConfigList, error) {
	list, err := c.cached()
	if err != nil || list != nil {
		return list, err
	}
	return c.current()
}

// cmdDel runs DEL of the list the attachment was added with (libcni's
// cache keeps it), so a pod leaves cleanly after its network stopped being
// offered; with neither that nor a current file there is nothing to delete.
func cmdDel(args *skel.CmdArgs) error {
	c, err := newCall(args)
	if err != nil {
		return err
	}
	list, err := c.attached()
	if err != nil || list == nil {
		return err
	}
	return c.delegated("DEL", c.cni.DelNetworkList(context.Background(), list, c.rt))
}

func cmdCheck(args *skel.CmdArgs) error {
	c, err := newCall(args)
	if err != nil {
		return err
	}
	list, err := c.attached()
	if err != nil {
		return err
	}
	if list == nil {
		return errNotOffered(c.conf, types.ErrTryAgainLater)
	}
	return c.delegated("CHECK", c.cni.CheckNetworkList(context.Background(), list, c.rt))
}

// cmdGC runs GC of the current list with the caller's valid attachments,
// for the NAD netclass-controller generates for a Network only (its config
// names itself as nad: the Network's namespace and name). Any other NAD
// does nothing: a PodNetwork's NADs in several namespaces share one list,
// and another NAD naming a Network (hand-written) would list only its own
// attachments, so the GC of either would tear down the others'.
func cmdGC(args *skel.CmdArgs) error {
	c, err := newCall(args)
	if err != nil {
		return err
	}
	if c.conf.Ref.Namespace == "" || c.conf.NAD != c.conf.Ref.Namespace+"/"+c.conf.Ref.Name {
		return nil
	}
	list, err := c.current()
	if err != nil || list == nil {
		return err
	}
	return c.delegated("GC", c.cni.GCNetworkList(context.Background(), list, &libcni.GCArgs{ValidAttachments: c.conf.ValidAttachments}))
}

func cmdStatus(args *skel.CmdArgs) error {
	c, err := newCall(args)
	if err != nil {
		return err
	}
	list, err := c.current()
	if err != nil {
		return err
	}
	if list == nil {
		return errNotOffered(c.conf, attach.ErrPluginNotAvailable)
	}
	return c.delegated("STATUS", c.cni.GetStatusNetworkList(context.Background(), list))
}

// podMayUse refuses a Network to a pod of another namespace, as prepare
// refuses its claim: a Network is its namespace's only, and Multus lets a
// pod name a NetworkAttachmentDefinition of another namespace. The pod's
// namespace is CNI_ARGS' K8S_POD_NAMESPACE (the runtime's, Multus's);
// without it a Network is refused. A PodNetwork is any namespace's, as
// for claims.
func (c *call) podMayUse() error {
	if c.conf.Ref.Namespace == "" {
		return nil
	}
	ns := ""
	for _, kv := range c.rt.Args {
		if kv[0] == "K8S_POD_NAMESPACE" {
			ns = kv[1]
		}
	}
	if ns == "" {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("netclass-nad: CNI_ARGS: K8S_POD_NAMESPACE is required: Network %s is only for pods of namespace %s", c.conf.Ref, c.conf.Ref.Namespace), "")
	}
	if ns != c.conf.Ref.Namespace {
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("netclass-nad: network: Network %s is only for pods of namespace %s, not of %s", c.conf.Ref, c.conf.Ref.Namespace, ns), "")
	}
	return nil
}

// staticAllowed refuses a static MAC or static IPs the caller asks for
// that no listed plugin takes as a capability: the network does not allow
// static addresses (a pod choosing another pod's MAC or address on a
// shared segment). A pod asks through Multus in three ways, each checked:
// runtimeConfig mac/ips (the capability, which libcni would drop silently),
// args.cni mac/ips (the pod's cni-args, passed to every listed plugin and
// its IPAM) and CNI_ARGS MAC= and IP= (Multus's older path for a pod's mac
// and ips, which the plugins and host-local honour too).
func (c *call) staticAllowed(list *libcni.NetworkConfigList) error {
	asked, err := c.staticAsked()
	if err != nil {
		return err
	}
	for _, key := range []string{"mac", "ips"} {
		taken := false
		for _, p := range list.Plugins {
			taken = taken || p.Network.Capabilities[key]
		}
		if !taken && asked[key] != "" {
			return types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("netclass-nad: %s: network %s does not allow static addresses", asked[key], c.conf.Ref), "")
		}
	}
	return nil
}

// staticAsked names, by capability ("mac", "ips"), the first field the
// caller asks for a static address with.
func (c *call) staticAsked() (map[string]string, error) {
	var args struct {
		CNI map[string]any `json:"cni"`
	}
	if len(c.conf.Args) > 0 && string(c.conf.Args) != "null" {
		if err := json.Unmarshal(c.conf.Args, &args); err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "netclass-nad: args", err.Error())
		}
	}
	asked := map[string]string{}
	note := func(key, field string, v any) {
		if asked[key] == "" && !empty(v) {
			asked[key] = field
		}
	}
	for key, cniArg := range map[string]string{"mac": "MAC", "ips": "IP"} {
		// The plugins and IPAM plugins decode these objects with
		// encoding/json, whose field names match in any case ("MAC", "IPs").
		for _, k := range foldedKeys(c.conf.RuntimeConfig, key) {
			note(key, "runtimeConfig."+k, c.conf.RuntimeConfig[k])
		}
		for _, k := range foldedKeys(args.CNI, key) {
			note(key, "args.cni."+k, args.CNI[k])
		}
		for _, kv := range c.rt.Args {
			if kv[0] == cniArg {
				note(key, "CNI_ARGS "+cniArg, kv[1])
			}
		}
	}
	return asked, nil
}

// foldedKeys returns the keys of m equal to key under case folding, sorted.
func foldedKeys(m map[string]any, key string) []string {
	var out []string
	for k := range m {
		if strings.EqualFold(k, key) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// empty reports whether a runtimeConfig value asks for nothing (absent,
// null, "" or an empty list, as a runtime may pass for a capability the
// pod did not use).
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	}
	return false
}
