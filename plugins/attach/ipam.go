package attach

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// IPAM runs the configured IPAM plugin as a delegate, exactly as upstream
// plugins do: same stdin, same environment, CNI_COMMAND overridden.
type IPAM struct {
	Type string
	Conf []byte
}

// NeedsInterface reports whether the IPAM plugin needs the pod's interface to
// exist before it can allocate: dhcp's daemon acquires the lease from it.
func (i IPAM) NeedsInterface() bool { return i.Type == "dhcp" }

// Add allocates addresses and returns them as a current-version result.
func (i IPAM) Add(ctx context.Context) (*current.Result, error) {
	if i.Type == "" {
		return &current.Result{}, nil
	}
	r, err := invoke.DelegateAdd(ctx, i.Type, i.Conf, nil)
	if err != nil {
		return nil, fmt.Errorf("ipam %q add: %w", i.Type, err)
	}
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return nil, fmt.Errorf("ipam %q returned an unusable result: %w", i.Type, err)
	}
	if len(res.IPs) == 0 {
		return nil, fmt.Errorf("ipam %q returned no address", i.Type)
	}
	return res, nil
}

// Del releases the addresses (idempotent in every upstream IPAM plugin).
func (i IPAM) Del(ctx context.Context) error {
	return i.noResult(ctx, "DEL", invoke.DelegateDel)
}

// Check asks the IPAM plugin to verify its allocation.
func (i IPAM) Check(ctx context.Context) error {
	return i.noResult(ctx, "CHECK", invoke.DelegateCheck)
}

// Status asks whether the IPAM plugin can serve ADDs.
func (i IPAM) Status(ctx context.Context) error {
	return i.noResult(ctx, "STATUS", invoke.DelegateStatus)
}

func (i IPAM) noResult(ctx context.Context, verb string, f func(context.Context, string, []byte, invoke.Exec) error) error {
	if i.Type == "" {
		return nil
	}
	if err := f(ctx, i.Type, i.Conf, nil); err != nil {
		return fmt.Errorf("ipam %q %s: %w", i.Type, verb, err)
	}
	return nil
}

// ReleaseFor runs IPAM DEL for another attachment than the current call's
// (GC of stale attachments): upstream host-local implements no GC of its
// own, so a delegated GC alone would leak their addresses.
func (i IPAM) ReleaseFor(ctx context.Context, r *Record) error {
	if i.Type == "" {
		return nil
	}
	path, err := invoke.FindInPath(i.Type, filepath.SplitList(os.Getenv("CNI_PATH")))
	if err != nil {
		return fmt.Errorf("ipam %q: %w", i.Type, err)
	}
	args := &invoke.Args{Command: "DEL", ContainerID: r.ContainerID, NetNS: r.NetNS, IfName: r.IfName,
		Path: os.Getenv("CNI_PATH")}
	if err := invoke.ExecPluginWithoutResult(ctx, path, i.Conf, args, nil); err != nil {
		return fmt.Errorf("ipam %q release %s/%s: %w", i.Type, r.ContainerID, r.IfName, err)
	}
	return nil
}
