package nft

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/google/nftables"
)

// Closing and opening ports. A port is closed while its name is in the
// guard's closed set and not in its opened set. Opening adds the name to
// opened rather than deleting it from closed: a transaction that deletes
// anything waits for an RCU grace period in the kernel (~15 ms on a
// 2-core VM, more while other commits queue behind it), one that only adds
// does not, and opening is on a pod's start. TidyGuard removes the names
// of open ports from both sets later, in one deleting transaction, off
// the pods' starts.
//
// An older netclass's base rules drop on closed alone (`iifname @closed
// drop`) and never read opened: while they are in place (a plugin of that
// version re-made them, during an upgrade or a rollback) a port is opened
// the old way, by deleting its name from closed, and a port whose name is
// in both sets counts as closed, until TidyGuard deletes it from both.

// guardSets is what the guard's closed and opened sets hold.
type guardSets struct {
	closed, opened map[string]bool
}

// readGuardSets reads both sets (a missing table or set holds nothing).
func readGuardSets(c *nftables.Conn) (guardSets, error) {
	gs := guardSets{closed: map[string]bool{}, opened: map[string]bool{}}
	ok, err := tableExists(c, guardTable())
	if err != nil || !ok {
		return gs, err
	}
	for name, into := range map[string]map[string]bool{guardClosedSet: gs.closed, guardOpenedSet: gs.opened} {
		set, err := c.GetSetByName(guardTable(), name)
		if err != nil {
			continue // no set: it holds nothing
		}
		els, err := c.GetSetElements(set)
		if err != nil {
			return gs, fmt.Errorf("list set %s of nftables table bridge %s: %w", name, GuardTable, err)
		}
		for _, e := range els {
			into[trimIfname(e.Key)] = true
		}
	}
	return gs, nil
}

// guardBaseCurrent reports whether the guard's base chains hold this
// version's rules (which read opened); reading three short chains, not the
// table.
func guardBaseCurrent(c *nftables.Conn) (bool, error) {
	for _, ch := range guardShared.bases {
		rules, err := c.GetRules(guardShared.table, ch)
		if errors.Is(err, syscall.ENOENT) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("list rules of chain bridge %s %s: %w", GuardTable, ch.Name, err)
		}
		if sameRules(rules, guardShared.rules[ch.Name]) != nil {
			return false, nil
		}
	}
	return true, nil
}

// effectivelyClosed: the ports the guard closes, given whether its base
// rules read opened.
func (gs guardSets) effectivelyClosed(current bool) map[string]bool {
	out := map[string]bool{}
	for p := range gs.closed {
		if !current || !gs.opened[p] {
			out[p] = true
		}
	}
	return out
}

// GuardClosed lists the ports that are closed.
func GuardClosed(c *nftables.Conn) (map[string]bool, error) {
	gs, err := readGuardSets(c)
	if err != nil {
		return nil, err
	}
	current := false
	if len(gs.opened) > 0 {
		if current, err = guardBaseCurrent(c); err != nil {
			return nil, err
		}
	}
	return gs.effectivelyClosed(current), nil
}

// OpenGuard lets the ports pass traffic (their source checks stay); ports
// that are not closed are left alone. It adds to opened (under an older
// base, deletes from closed).
func OpenGuard(c *nftables.Conn, hostIfs ...string) error {
	gs, err := readGuardSets(c)
	if err != nil || !slices.ContainsFunc(hostIfs, func(h string) bool { return gs.closed[h] }) {
		return err
	}
	current, err := guardBaseCurrent(c)
	if err != nil {
		return err
	}
	closed := gs.effectivelyClosed(current)
	var els []nftables.SetElement
	for _, h := range hostIfs {
		if closed[h] {
			els = append(els, nftables.SetElement{Key: ifname(h)})
		}
	}
	if len(els) == 0 {
		return nil
	}
	if current {
		err = c.SetAddElements(guardShared.sets[1], els)
	} else {
		err = c.SetDeleteElements(guardShared.sets[0], els)
	}
	if err == nil {
		err = c.Flush()
	}
	if err != nil {
		return fmt.Errorf("open ports %v in nftables table bridge %s: %w", hostIfs, GuardTable, err)
	}
	return nil
}

// TidyGuard deletes the names of the ports opened since they were closed
// (in both sets) from both, in one transaction (none when there is nothing
// to tidy). A port stays as open as it was, under this version's base
// rules or an older one's. A name in opened alone (a port deleted without
// its DEL) is left: closeGuard takes it out if a port of that name is
// closed again. Deleting it here could race that port's close and open
// between this read and its commit and close the port again; a name in
// both sets at the commit, as the batch needs (it fails whole otherwise),
// is always a port that was opened.
func TidyGuard(c *nftables.Conn) error {
	gs, err := readGuardSets(c)
	if err != nil {
		return err
	}
	var both []nftables.SetElement
	for p := range gs.opened {
		if gs.closed[p] {
			both = append(both, nftables.SetElement{Key: ifname(p)})
		}
	}
	if len(both) == 0 {
		return nil
	}
	err = c.SetDeleteElements(guardShared.sets[0], both)
	if err == nil {
		err = c.SetDeleteElements(guardShared.sets[1], both)
	}
	if err == nil {
		err = c.Flush()
	}
	if err != nil {
		return fmt.Errorf("tidy the opened ports of nftables table bridge %s: %w", GuardTable, err)
	}
	return nil
}

// closeGuard closes the port: its name into closed, and out of opened
// where an earlier port of that name left it (a deleting transaction, only
// then). The base is (re)made when it is not this version's.
func closeGuard(c *nftables.Conn, hostIf string) error {
	return retryGone(func() error {
		st, err := guardShared.read(c)
		if err != nil {
			return err
		}
		if !st.baseOK {
			if err := guardShared.queueBase(c); err != nil {
				return err
			}
		}
		gs, err := readGuardSets(c)
		if err != nil {
			return err
		}
		el := []nftables.SetElement{{Key: ifname(hostIf)}}
		if err := c.SetAddElements(guardShared.sets[0], el); err != nil {
			return fmt.Errorf("close port %q: %w", hostIf, err)
		}
		if gs.opened[hostIf] {
			if err := c.SetDeleteElements(guardShared.sets[1], el); err != nil {
				return fmt.Errorf("close port %q: %w", hostIf, err)
			}
		}
		if err := c.Flush(); err != nil && !errors.Is(err, syscall.EEXIST) {
			return unsupported(fmt.Errorf("close port %q in nftables table bridge %s: %w", hostIf, GuardTable, err), GuardFeature)
		}
		return nil
	})
}

// DeleteGuard removes everything of the host end's port; none is success.
func DeleteGuard(c *nftables.Conn, hostIf string) error {
	err := retryGone(func() error {
		gs, err := readGuardSets(c)
		if err != nil {
			return err
		}
		el := []nftables.SetElement{{Key: ifname(hostIf)}}
		queued := false
		for i, in := range []map[string]bool{gs.closed, gs.opened} {
			if in[hostIf] {
				queued = true
				if err := c.SetDeleteElements(guardShared.sets[i], el); err != nil {
					return err
				}
			}
		}
		if !queued {
			return nil
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("remove port %q from the sets of nftables table bridge %s: %w", hostIf, GuardTable, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return guardShared.sync(c, map[string]*portObjects{hostIf: nil})[hostIf].Err
}

// retryGone runs a read-then-delete step once more when an element it
// deleted was gone meanwhile (ENOENT: TidyGuard or another port's step
// deleted it between the read and the commit).
func retryGone(step func() error) error {
	err := step()
	if errors.Is(err, syscall.ENOENT) {
		err = step()
	}
	return err
}
