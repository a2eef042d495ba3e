package nft

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// sets reads the guard's closed and opened sets, sorted.
func (b *switchBed) sets(t *testing.T) (closed, opened []string) {
	t.Helper()
	b.nft(t, func(c *nftables.Conn) error {
		gs, err := readGuardSets(c)
		closed, opened = slices.Sorted(maps.Keys(gs.closed)), slices.Sorted(maps.Keys(gs.opened))
		return err
	})
	return closed, opened
}

// passes reports whether a datagram crosses port a both ways.
func (b *switchBed) passes(t *testing.T) bool {
	t.Helper()
	ab, ba := b.udpArrives(t, "a", "b", false, nil, netip.Addr{}), b.udpArrives(t, "b", "a", false, nil, netip.Addr{})
	if ab != ba {
		t.Fatalf("port a passes one way only (a to b %v, b to a %v)", ab, ba)
	}
	return ab
}

func (b *switchBed) wantSets(t *testing.T, stage string, closed, opened []string) {
	t.Helper()
	if c, o := b.sets(t); !slices.Equal(c, closed) || !slices.Equal(o, opened) {
		t.Fatalf("%s: closed %v, opened %v; want %v, %v", stage, c, o, closed, opened)
	}
}

// Opening adds the port to opened (its name stays in closed: nothing was
// deleted); TidyGuard then takes it out of both, and it stays open.
func TestOpenGuardAddsAndTidyGuardDeletes(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	b.guard(t, true, "a")
	if b.passes(t) {
		t.Fatal("a closed port passed a datagram")
	}
	b.nft(t, func(c *nftables.Conn) error { return OpenGuard(c, "pa") })
	b.wantSets(t, "opened", []string{"pa"}, []string{"pa"})
	if !b.passes(t) {
		t.Fatal("an opened port passed nothing")
	}
	b.nft(t, func(c *nftables.Conn) error {
		if closed, err := GuardClosed(c); err != nil || closed["pa"] {
			return fmt.Errorf("GuardClosed says the opened port is closed (%v)", err)
		}
		return TidyGuard(c)
	})
	b.wantSets(t, "tidied", nil, nil)
	if !b.passes(t) {
		t.Fatal("a tidied port passed nothing")
	}
}

// A name an earlier port of that name left in opened (its DEL never ran)
// does not open a new port closed under it; TidyGuard leaves a name in
// opened alone (closing is what takes it out).
func TestCloseGuardTakesAStaleNameOutOfOpened(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	b.nft(t, func(c *nftables.Conn) error {
		if err := guardShared.queueBase(c); err != nil {
			return err
		}
		if err := c.SetAddElements(guardShared.sets[1], []nftables.SetElement{{Key: ifname("pa")}, {Key: ifname("gone")}}); err != nil {
			return err
		}
		return c.Flush()
	})
	b.guard(t, true, "a")
	b.wantSets(t, "closed", []string{"pa"}, []string{"gone"})
	if b.passes(t) {
		t.Fatal("a port closed under a stale opened name passed a datagram")
	}
	b.nft(t, TidyGuard)
	b.wantSets(t, "tidied", []string{"pa"}, []string{"gone"})
	if b.passes(t) {
		t.Fatal("tidying opened a closed port")
	}
}

// Under an older netclass's base rules (`iifname @closed drop`, which a
// plugin of that version re-makes in an upgrade or a rollback), a port in
// both sets is closed (GuardClosed says so), TidyGuard opens it, and
// OpenGuard opens a port by deleting it from closed.
func TestOlderBaseRulesOpenByDeletion(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	b.guard(t, true, "a")
	b.nft(t, func(c *nftables.Conn) error { return OpenGuard(c, "pa") })
	b.nft(t, queueOlderBase)
	if b.passes(t) {
		t.Fatal("under the older base a port in both sets passed a datagram")
	}
	b.nft(t, func(c *nftables.Conn) error {
		if closed, err := GuardClosed(c); err != nil || !closed["pa"] {
			return fmt.Errorf("under the older base GuardClosed says a port in both sets is open (%v)", err)
		}
		return TidyGuard(c)
	})
	b.wantSets(t, "tidied", nil, nil)
	if !b.passes(t) {
		t.Fatal("under the older base a tidied port passed nothing")
	}
	b.nft(t, func(c *nftables.Conn) error {
		if err := c.SetAddElements(guardShared.sets[0], []nftables.SetElement{{Key: ifname("pa")}}); err != nil {
			return err
		}
		return c.Flush()
	})
	if b.passes(t) {
		t.Fatal("under the older base a closed port passed a datagram")
	}
	b.nft(t, func(c *nftables.Conn) error { return OpenGuard(c, "pa") })
	b.wantSets(t, "opened under the older base", nil, nil)
	if !b.passes(t) {
		t.Fatal("under the older base an opened port passed nothing")
	}
}

// queueOlderBase rewrites the guard's base chains as netclass wrote them
// before the opened set: drop on closed alone.
func queueOlderBase(c *nftables.Conn) error {
	for _, ch := range guardShared.bases {
		c.FlushChain(ch)
		c.AddRule(&nftables.Rule{Table: guardShared.table, Chain: ch,
			Exprs: concat(ifnameInSet(ch.Name == "prerouting", guardClosedSet, 0), []expr.Any{verdict(expr.VerdictDrop)})})
		if ch.Name == "prerouting" {
			c.AddRule(&nftables.Rule{Table: guardShared.table, Chain: ch, Exprs: dispatchByIifname(guardPortsMap, 0)})
		}
	}
	return c.Flush()
}
