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

// CheckNoRootTBF verifies nothing of ours (tbf, or cake) shapes the link's egress.
func CheckNoRootTBF(l netlink.Link) error {
	qs, err := qdiscs(l)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if t := q.Type(); (t == QueueTBF || t == QueueCake) && q.Attrs().Parent == netlink.HANDLE_ROOT {
			return fmt.Errorf("link %q has a root %s qdisc it should not have", l.Attrs().Name, t)
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

// CheckShaper verifies the link's root qdisc is what SetShaper(s, queue)
// makes: the tbf and, with fq_codel, the fq_codel under it (ECN on) and
// nothing else; with cake, cake at s's rate in besteffort mode.
func CheckShaper(l netlink.Link, s TBF, queue string) error {
	if queue == QueueCake {
		return checkRootCake(l, s)
	}
	if err := CheckRootTBF(l, s); err != nil {
		return err
	}
	qs, err := qdiscs(l)
	if err != nil {
		return err
	}
	var child netlink.Qdisc
	for _, q := range qs {
		if q.Attrs().Parent == netlink.MakeHandle(1, 1) {
			child = q
		}
	}
	switch {
	case queue == QueueTBF && child != nil:
		return fmt.Errorf("tbf of %q has a %s under it, want tbf alone", l.Attrs().Name, child.Type())
	case queue == QueueFQCodel && child == nil:
		return fmt.Errorf("tbf of %q has no fq_codel under it", l.Attrs().Name)
	case queue == QueueFQCodel:
		fq, ok := child.(*netlink.FqCodel)
		if !ok {
			return fmt.Errorf("tbf of %q has a %s under it, want fq_codel", l.Attrs().Name, child.Type())
		}
		if fq.ECN != 1 {
			return fmt.Errorf("fq_codel of %q does not mark ECN", l.Attrs().Name)
		}
	}
	return nil
}

func checkRootCake(l netlink.Link, s TBF) error {
	got, ok, err := rootCake(l.Attrs().Index)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("link %q has no root cake qdisc", l.Attrs().Name)
	case got.RateBytes != s.RateBytes || got.Diffserv != cakeBestEffort:
		return fmt.Errorf("cake of %q is bandwidth %d B/s diffserv mode %d, want %d B/s besteffort (%d)",
			l.Attrs().Name, got.RateBytes, got.Diffserv, s.RateBytes, cakeBestEffort)
	}
	return nil
}

// HasIngressHook reports whether anything hooks the link's ingress in tc
// (an ingress or clsact qdisc): a filter or BPF program there runs before
// netfilter's ingress hook and may redirect a packet past it.
func HasIngressHook(l netlink.Link) (bool, error) {
	qs, err := qdiscs(l)
	if err != nil {
		return false, err
	}
	for _, q := range qs {
		if t := q.Type(); t == "ingress" || t == "clsact" {
			return true, nil
		}
	}
	return false, nil
}
