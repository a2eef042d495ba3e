package tc

import (
	"errors"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// veth returns one end of a veth pair in a fresh namespace, with the
// calling thread's netlink calls going there through fn.
func inVeth(t *testing.T, fn func(l netlink.Link) error) {
	t.Helper()
	n := nstest.New(t)
	n.Do(t, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "q0"}, PeerName: "q1"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("q0")
		if err != nil {
			return err
		}
		return fn(l)
	})
}

// TestShaperQueues: each queue is set, read back by CHECK (which tells it
// from the others) and removed with the root qdisc; a kernel without the
// queue's qdisc gets a *MissingQdiscError (CNI error 7) and HasQdisc says
// so. This machine's kernel lacks fq_codel and cake; the VM's has both.
func TestShaperQueues(t *testing.T) {
	if guest.InVM() {
		guest.Require(t, guest.FQCodel, guest.Cake)
	}
	s := TBF{RateBytes: 2_500_000, BurstBytes: 25_000}
	for _, queue := range []string{QueueTBF, QueueFQCodel, QueueCake} {
		t.Run(queue, func(t *testing.T) {
			has, err := HasQdisc(queue)
			if err != nil {
				t.Fatal(err)
			}
			inVeth(t, func(l netlink.Link) error {
				err := SetShaper(l.Attrs().Index, s, queue)
				if !has {
					var m *MissingQdiscError
					if !errors.As(err, &m) || m.Kind != queue || !strings.Contains(err.Error(), "this kernel has no "+queue) {
						t.Errorf("SetShaper(%s) on a kernel without it: %v, want a *MissingQdiscError", queue, err)
					}
					return nil
				}
				if err != nil {
					return err
				}
				if err := CheckShaper(l, s, queue); err != nil {
					t.Errorf("CHECK of what SetShaper made: %v", err)
				}
				for _, other := range []string{QueueTBF, QueueFQCodel, QueueCake} {
					if err := CheckShaper(l, s, other); other != queue && err == nil {
						t.Errorf("CHECK for %s passed on a link shaped with %s", other, queue)
					}
				}
				if err := CheckShaper(l, TBF{RateBytes: s.RateBytes * 2, BurstBytes: s.BurstBytes}, queue); err == nil {
					t.Error("CHECK for another rate passed")
				}
				if err := DeleteRoot(l.Attrs().Index); err != nil {
					return err
				}
				return CheckNoRootTBF(l)
			})
		})
	}
	if ok, err := HasQdisc(QueueTBF); !ok || err != nil {
		t.Errorf("HasQdisc(tbf) = %v, %v: every kernel netclass runs on has tbf", ok, err)
	}
}
