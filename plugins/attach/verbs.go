package attach

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// The parts of DEL, CHECK and GC every netclass plugin shares.

// ForDel returns the record of the attachment a DEL is about, or a minimal
// one when there is none (a DEL without ADD, or a second DEL). The runtime's
// CNI_NETNS wins over the recorded one; it may be empty when the namespace
// is gone, and then the recorded one tells where the pod was.
func (s Store) ForDel(network string, args *skel.CmdArgs) (*Record, error) {
	r, err := s.Get(network, args.ContainerID, args.IfName)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &Record{Network: network, ContainerID: args.ContainerID, IfName: args.IfName}
	}
	if args.Netns != "" {
		r.NetNS = args.Netns
	}
	return r, nil
}

// Del runs a plugin's teardown and IPAM DEL at once (both wait on the
// kernel or a process) and reports failures as a CNI error.
func Del(ctx context.Context, ipam IPAM, r *Record, teardown func(*Record) error) error {
	err := Parallel(
		func() error { return ipam.Del(ctx) },
		func() error { return teardown(r) },
	)
	if err != nil {
		return Internal(err, nil)
	}
	return nil
}

// BeginCheck does what every CHECK starts with: prevResult is required, the
// namespace must be usable, and the IPAM plugin's own CHECK must pass.
func BeginCheck(ctx context.Context, cniVersion string, rawPrev map[string]any, netnsPath string, ipam IPAM) (*current.Result, error) {
	prev, err := PrevResult(cniVersion, rawPrev)
	if err != nil {
		return nil, err
	}
	if err := UsableNetNS(netnsPath); err != nil {
		return nil, err
	}
	if err := ipam.Check(ctx); err != nil {
		return nil, Internal(err, nil)
	}
	return prev, nil
}

// GC tears down every recorded attachment of the network that is not in
// valid, releasing its addresses with a per-attachment IPAM DEL (upstream
// host-local has no GC of its own). Unlike upstream plugins it does not
// delegate GC to the IPAM plugin: netclass's callers share an IPAM store
// (netclass-dra's claims and its generated NADs draw from one host-local
// directory and node block) but each knows only its own attachments, so a
// GC-capable IPAM given one caller's valid list would release the other's
// addresses, to be handed out twice.
func GC(ctx context.Context, s Store, network string, valid []types.GCAttachment, ipam IPAM, teardown func(*Record) error) error {
	recs, err := s.List(network)
	if err != nil {
		return Internal(err, nil)
	}
	keep := Valid(valid)
	var errs []error
	for _, r := range recs {
		if !keep[r.Key()] {
			errs = append(errs, ipam.ReleaseFor(ctx, r), teardown(r))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Internal(err, nil)
	}
	return nil
}
