package bridgeport

import (
	"context"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/attach"
)

// Join allocates the pod's addresses with ipam while join makes sure the
// bridge exists and creates the pod's port on it — concurrently, or the
// port first when the IPAM plugin needs the pod's interface
// (attach.WithIPAM). join returns a nil bridge when it made nothing. What
// succeeded is pushed onto undo: the allocation's release, and leave for a
// port that was (even partly) made.
func Join(ctx context.Context, ipam attach.IPAM, join func() (br, host netlink.Link, err error), leave func() error, undo *attach.Undo) (res *current.Result, br, host netlink.Link, err error) {
	var allocated bool
	var joinErr error
	err = attach.WithIPAM(ipam,
		func() (err error) { res, err = ipam.Add(ctx); allocated = err == nil; return err },
		func() error { br, host, joinErr = join(); return joinErr },
	)
	if allocated {
		undo.Push(func() error { return ipam.Del(ctx) })
	}
	if br != nil && Created(host, joinErr) {
		undo.Push(leave)
	}
	return res, br, host, err
}
