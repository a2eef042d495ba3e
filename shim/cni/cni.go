// Package cni executes the installed CNI plugins through libcni, exactly as a
// container runtime does: netclass-dra never links the plugins, it runs the
// binaries found in the CNI bin directory with a rendered configuration list.
package cni

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netclass-dev/netclass/conf/netconf"
)

// Attachment is one interface of one pod sandbox.
type Attachment struct {
	ContainerID string // the pod sandbox ID
	NetNS       string // path of the sandbox's network namespace
	IfName      string
	// Pod identity, passed as the conventional CNI_ARGS.
	PodNamespace, PodName, PodUID string
	// Static values for the "mac", "ips" and "deviceID" capabilities.
	MAC      string
	IPs      []string
	DeviceID string
}

// Result is what ADD reported for the attachment's interface.
type Result struct {
	InterfaceName string
	MAC           string
	IPs           []string // CIDR form
	// Warnings are what the plugins warned of on stderr while the ADD
	// succeeded (conf/netconf.WarningPrefix): something done otherwise
	// than the configuration says, which the pod's Events must tell.
	Warnings []string
}

// Runner runs configuration lists.
type Runner struct {
	cni      *libcni.CNIConfig
	binDirs  []string
	cacheDir string
}

// New returns a runner looking up plugins in binDirs and caching results
// (which DEL and crash recovery read) in cacheDir.
func New(binDirs []string, cacheDir string) *Runner {
	return &Runner{cni: libcni.NewCNIConfigWithCacheDir(binDirs, cacheDir, nil), binDirs: binDirs, cacheDir: cacheDir}
}

// capturing returns a libcni runner, sharing r's plugins and result cache,
// whose plugins' stderr goes to the daemon's stderr (as with libcni's
// default) and into buf too.
func (r *Runner) capturing(buf *bytes.Buffer) *libcni.CNIConfig {
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: io.MultiWriter(os.Stderr, buf)}, PluginDecoder: version.PluginDecoder{}}
	return libcni.NewCNIConfigWithCacheDir(r.binDirs, r.cacheDir, exec)
}

func parse(confList []byte) (*libcni.NetworkConfigList, error) {
	list, err := libcni.NetworkConfFromBytes(confList)
	if err != nil {
		return nil, fmt.Errorf("parse configuration list: %w", err)
	}
	return list, nil
}

func (a Attachment) runtimeConf() *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: a.ContainerID, NetNS: a.NetNS, IfName: a.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "true"},
			{"K8S_POD_NAMESPACE", a.PodNamespace},
			{"K8S_POD_NAME", a.PodName},
			{"K8S_POD_INFRA_CONTAINER_ID", a.ContainerID},
			{"K8S_POD_UID", a.PodUID},
		},
		CapabilityArgs: map[string]any{},
	}
	if a.MAC != "" {
		rt.CapabilityArgs["mac"] = a.MAC
	}
	if len(a.IPs) > 0 {
		rt.CapabilityArgs["ips"] = a.IPs
	}
	if a.DeviceID != "" {
		rt.CapabilityArgs["deviceID"] = a.DeviceID
	}
	return rt
}

// Add runs ADD of every plugin of the list.
func (r *Runner) Add(ctx context.Context, confList []byte, a Attachment) (Result, error) {
	list, err := parse(confList)
	if err != nil {
		return Result{}, err
	}
	var stderr bytes.Buffer
	res, err := r.capturing(&stderr).AddNetworkList(ctx, list, a.runtimeConf())
	if err != nil {
		return Result{}, fmt.Errorf("CNI ADD of %s on %s in sandbox %s: %w", list.Name, a.IfName, short(a.ContainerID), err)
	}
	out, err := Summarize(res, a.IfName)
	out.Warnings = netconf.Warnings(stderr.Bytes())
	return out, err
}

// Del runs DEL of every plugin (in reverse order); plugins make it idempotent.
func (r *Runner) Del(ctx context.Context, confList []byte, a Attachment) error {
	list, err := parse(confList)
	if err != nil {
		return err
	}
	if err := r.cni.DelNetworkList(ctx, list, a.runtimeConf()); err != nil {
		return fmt.Errorf("CNI DEL of %s on %s in sandbox %s: %w", list.Name, a.IfName, short(a.ContainerID), err)
	}
	return nil
}

// GC runs GC of every plugin with the attachments that are still valid.
func (r *Runner) GC(ctx context.Context, confList []byte, valid []Attachment) error {
	list, err := parse(confList)
	if err != nil {
		return err
	}
	args := &libcni.GCArgs{}
	for _, a := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	if err := r.cni.GCNetworkList(ctx, list, args); err != nil {
		return fmt.Errorf("CNI GC of %s: %w", list.Name, err)
	}
	return nil
}

// Cached returns the result libcni cached after a successful ADD; ok is
// false when there is none (the ADD never completed).
func (r *Runner) Cached(confList []byte, a Attachment) (res Result, ok bool, err error) {
	list, err := parse(confList)
	if err != nil {
		return Result{}, false, err
	}
	cached, err := r.cni.GetNetworkListCachedResult(list, a.runtimeConf())
	if err != nil {
		return Result{}, false, fmt.Errorf("read cached result of %s on %s: %w", list.Name, a.IfName, err)
	}
	if cached == nil {
		return Result{}, false, nil
	}
	res, err = Summarize(cached, a.IfName)
	return res, err == nil, err
}

// Summarize extracts the pod-side interface named ifName, its MAC and its
// addresses from a CNI result.
func Summarize(res types.Result, ifName string) (Result, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return Result{}, fmt.Errorf("convert CNI result: %w", err)
	}
	out := Result{InterfaceName: ifName}
	idx := -1
	for i, iface := range r.Interfaces {
		if iface.Name == ifName && iface.Sandbox != "" {
			idx, out.MAC = i, iface.Mac
			break
		}
	}
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface == idx || idx == -1 {
			out.IPs = append(out.IPs, ip.Address.String())
		}
	}
	if idx == -1 && len(out.IPs) == 0 {
		return out, errors.New("the CNI result names neither the pod's interface nor an address")
	}
	return out, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
