package tc

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/nldump"
)

// CheckRootTBF verifies the link's root qdisc is the tbf s renders.
func CheckRootTBF(l netlink.Link, s TBF) error {
	qs, err := qdiscs(l)
	if err != nil {
		return err
	}
	want := s.Qdisc(l.Attrs().Index)
	for _, q := range qs {
		if q.Attrs().Parent != netlink.HANDLE_ROOT {
			continue
		}
		got, ok := q.(*netlink.Tbf)
		if !ok {
			return fmt.Errorf("root qdisc of %q is %s, want tbf", l.Attrs().Name, q.Type())
		}
		if got.Rate != want.Rate || got.Buffer != want.Buffer || got.Limit != want.Limit {
			return fmt.Errorf("tbf of %q is rate %d buffer %d limit %d, want rate %d buffer %d limit %d",
				l.Attrs().Name, got.Rate, got.Buffer, got.Limit, want.Rate, want.Buffer, want.Limit)
		}
		return nil
	}
	return fmt.Errorf("link %q has no root tbf qdisc", l.Attrs().Name)
}

// CheckNoRootTBF verifies nothing of ours shapes the link's egress.
func CheckNoRootTBF(l netlink.Link) error {
	qs, err := qdiscs(l)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if _, ok := q.(*netlink.Tbf); ok && q.Attrs().Parent == netlink.HANDLE_ROOT {
			return fmt.Errorf("link %q has a root tbf qdisc it should not have", l.Attrs().Name)
		}
	}
	return nil
}

// IngressRedirectTarget returns the index of the link the ingress of l is
// redirected to, or 0 when it is not redirected.
func IngressRedirectTarget(l netlink.Link) (int, error) {
	fs, err := nldump.Retry(func() ([]netlink.Filter, error) {
		return netlink.FilterList(l, netlink.MakeHandle(0xffff, 0))
	})
	if err != nil {
		return 0, fmt.Errorf("list ingress filters of %q: %w", l.Attrs().Name, err)
	}
	for _, f := range fs {
		u, ok := f.(*netlink.U32)
		if !ok {
			continue
		}
		for _, a := range u.Actions {
			if m, ok := a.(*netlink.MirredAction); ok && m.MirredAction == netlink.TCA_EGRESS_REDIR {
				return m.Ifindex, nil
			}
		}
	}
	return 0, nil
}
