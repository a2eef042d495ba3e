package nad

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/nadfile"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

// call is one invocation: the parsed configuration, libcni over CNI_PATH,
// and the attachment as libcni takes it.
type call struct {
	conf *Conf
	cni  *libcni.CNIConfig
	rt   *libcni.RuntimeConf
}

func newCall(args *skel.CmdArgs) (*call, error) {
	c, err := Parse(args.StdinData)
	if err != nil {
		return nil, err
	}
	rt := &libcni.RuntimeConf{ContainerID: args.ContainerID, NetNS: args.Netns, IfName: args.IfName,
		Args: cniArgs(args.Args), CapabilityArgs: c.RuntimeConfig}
	return &call{conf: c, cni: libcni.NewCNIConfigWithCacheDir(filepath.SplitList(args.Path), nadfile.CacheDir(c.StateDir), nil), rt: rt}, nil
}

// cniArgs splits CNI_ARGS ("K=V;K=V") into libcni's pairs.
func cniArgs(s string) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// errNotOffered says the network has no rendered file on this node.
func errNotOffered(c *Conf, code uint) error {
	return types.NewError(code, fmt.Sprintf("netclass-nad: network %s is not offered on this node", c.Ref),
		fmt.Sprintf("no %s: netclass-dra writes it while the network is Ready and usable on the node (a Network of a ClusterNetwork whose NodeNetwork is Ready here, or a PodNetwork of provider netclass.dev)",
			nadfile.Path(c.StateDir, c.Ref)))
}

// current reads the rendered list of the network on this node (nil, nil:
// not offered).
func (c *call) current() (*libcni.NetworkConfigList, error) {
	path := nadfile.Path(c.conf.StateDir, c.conf.Ref)
	err := trusted(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("netclass-nad: stateDir: refused: %v", err), "")
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, fmt.Sprintf("netclass-nad: read %s", path), err.Error())
	}
	f, err := nadfile.Parse(b, c.conf.Ref)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("netclass-nad: %s", path), err.Error())
	}
	return c.list(f.ConfList)
}

// cached reads the list the attachment was added with (nil, nil: none).
func (c *call) cached() (*libcni.NetworkConfigList, error) {
	b, _, err := c.cni.GetNetworkListCachedConfig(&libcni.NetworkConfigList{Name: ListName(c.conf.Ref)}, c.rt)
	if err != nil || b == nil {
		return nil, nil //nolint:nilerr // an unreadable cache entry is as good as none: the current file is used
	}
	return c.list(b)
}

func (c *call) list(b []byte) (*libcni.NetworkConfigList, error) {
	b, err := withArgs(b, c.conf.Args, c.conf.NAD)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "netclass-nad: rendered configuration list", err.Error())
	}
	l, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "netclass-nad: rendered configuration list", err.Error())
	}
	return l, nil
}

// ListName is the name netclass-dra renders the network's list with (its
// host-local reservations are kept under it, shared with claim attachments).
func ListName(r nadfile.Ref) string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "_" + r.Name
}

// delegated names the network on a delegate's error, keeping a CNI error's
// code.
func (c *call) delegated(verb string, err error) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("netclass-nad: %s of network %s", verb, c.conf.Ref)
	var te *types.Error
	if errors.As(err, &te) {
		return types.NewError(te.Code, msg+": "+te.Msg, te.Details)
	}
	return types.NewError(types.ErrInternal, msg, err.Error())
}
