package nft

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// SyncPortQoS brings the host end's rules to the plan in place, in one
// transaction holding only the differences (a rule's chain rewritten when
// its rules changed, a destination set updated element by element): what
// did not change is not touched, a meter whose rule is unchanged keeps its
// state, and no packet ever meets a half-updated port. It reports whether
// anything was sent; rules already equal to the plan cost only the reads.
// A port without rules gets them as ApplyPortQoS would install them, and a
// plan without rules removes the port's.
func SyncPortQoS(c *nftables.Conn, hostIf string, plan *qos.Plan) (bool, error) {
	res := SyncPorts(c, map[string]*qos.Plan{hostIf: plan})
	return res[hostIf].Changed, res[hostIf].Err
}

// PortResult is what a sync did to one port.
type PortResult struct {
	Changed bool
	// At is when the port's change was committed (zero: none).
	At  time.Time
	Err error
}

// maxPortsPerTransaction bounds the ports one SyncPorts transaction holds
// (tens of messages each), so that a transaction and its acknowledgements
// fit the socket's buffers.
const maxPortsPerTransaction = 32

// SyncPorts is SyncPortQoS for many ports at once: the shared table is read
// once and the ports' differences go in few transactions (a transaction
// that rewrites or removes rules waits for an RCU grace period: one wait
// for up to maxPortsPerTransaction ports, not one each). When a
// transaction fails, each of its ports is tried on its own, so one port's
// failure holds up no other.
func SyncPorts(c *nftables.Conn, plans map[string]*qos.Plan) map[string]PortResult {
	out := make(map[string]PortResult, len(plans))
	ts, err := readTable(c)
	if err != nil {
		for h := range plans {
			out[h] = PortResult{Err: err}
		}
		return out
	}
	ports := sortedKeys(plans)
	for len(ports) > 0 {
		n := min(len(ports), maxPortsPerTransaction)
		syncChunk(c, ts, plans, ports[:n], out)
		ports = ports[n:]
	}
	return out
}

// syncChunk syncs some of the ports in one transaction.
func syncChunk(c *nftables.Conn, ts *tableState, plans map[string]*qos.Plan, ports []string, out map[string]PortResult) {
	chunk := make(map[string]*qos.Plan, len(ports))
	for _, h := range ports {
		chunk[h] = plans[h]
	}
	fail := func(err error) {
		for _, h := range ports {
			out[h] = PortResult{Err: err}
		}
	}
	changed, err := queuePorts(c, ts, chunk)
	if err != nil {
		fail(err)
		return
	}
	if len(changed) == 0 {
		fail(nil)
		return
	}
	if err := c.Flush(); err != nil {
		if len(ports) == 1 {
			fail(unsupported(fmt.Errorf("update the rules of port %q in nftables table bridge %s: %w", ports[0], PortQoSTable, err), PortFeature))
			return
		}
		for _, h := range ports { // each on its own, its state read again
			out[h] = SyncPorts(c, map[string]*qos.Plan{h: plans[h]})[h]
		}
		return
	}
	ts.baseOK = true // repaired by the transaction if it was not
	for _, h := range ports {
		out[h] = PortResult{Changed: changed[h]}
	}
}

// queuePorts adds every port's differences to the batch and returns the
// ports that have any.
func queuePorts(c *nftables.Conn, ts *tableState, plans map[string]*qos.Plan) (map[string]bool, error) {
	changed := map[string]bool{}
	t := portTable()
	baseQueued := false
	lastSet := uint32(portMapID)
	for _, h := range sortedKeys(plans) {
		plan, st := plans[h], ts.port(h)
		if !plan.NeedsRules() {
			found, err := st.queueDelete(c, h)
			if err != nil {
				return nil, err
			}
			changed[h] = found
			continue
		}
		got, err := st.owned(c, t, h)
		if err != nil {
			return nil, err
		}
		want := portRulesetAfter(h, plan, lastSet)
		lastSet = want.lastSet
		ch := diff(got, want)
		mapped := st.element != nil && st.element.Kind == expr.VerdictGoto && st.element.Chain == PortChain(h)
		if ch.empty() && mapped && st.baseOK {
			continue
		}
		changed[h] = true
		if !st.baseOK && !baseQueued {
			if err := queueBase(c); err != nil {
				return nil, err
			}
			baseQueued = true
		}
		if err := queueChanges(c, t, want, ch); err != nil {
			return nil, err
		}
		if !mapped {
			if err := remap(c, st, h); err != nil {
				return nil, err
			}
		}
	}
	return trueOnly(changed), nil
}

func trueOnly(m map[string]bool) map[string]bool {
	for k, v := range m {
		if !v {
			delete(m, k)
		}
	}
	return m
}

// remap points the host end's map entry at its chain.
func remap(c *nftables.Conn, st *portState, hostIf string) error {
	if st.element != nil && st.mapSet != nil {
		if err := c.SetDeleteElements(portMapSet(), []nftables.SetElement{{Key: ifname(hostIf)}}); err != nil {
			return fmt.Errorf("unmap port %q: %w", hostIf, err)
		}
	}
	if err := c.SetAddElements(portMapSet(), []nftables.SetElement{portElement(hostIf)}); err != nil {
		return fmt.Errorf("map port %q: %w", hostIf, err)
	}
	return nil
}

// SyncPodQoS brings the interface's table in the pod's namespace to the
// plan in place, as SyncPortQoS does for a host port.
func SyncPodQoS(c *nftables.Conn, ifname string, plan *qos.Plan) (bool, error) {
	if !plan.NeedsRules() {
		found, err := HasAnyPodQoS(c, ifname)
		if err != nil || !found {
			return false, err
		}
		return true, DeletePodQoS(c, ifname)
	}
	return syncTable(c, podRuleset(ifname, plan), PodEgressHook)
}

// syncTable brings a table that one attachment owns whole (each of its
// chains and sets) to want in place, in one transaction of the
// differences. A missing table, or one whose base chains are not hooked
// as rendered, is installed whole (atomically replaced). feature names the
// kernel feature a failing transaction may lack ("": none).
func syncTable(c *nftables.Conn, want *ruleset, feature string) (bool, error) {
	wrap := func(err error) error {
		if err == nil || feature == "" {
			return err
		}
		return unsupported(err, feature)
	}
	t := want.table
	chains, sets, present, err := readTableObjects(c, t)
	if err != nil {
		return false, err
	}
	if !present || !basesMatch(chains, want) {
		return true, wrap(install(c, want))
	}
	names := make([]string, 0, len(chains))
	for _, ch := range chains {
		names = append(names, ch.Name)
	}
	got, err := readOwned(c, t, names, sets)
	if err != nil {
		return false, err
	}
	ch := diff(got, want)
	if ch.empty() {
		return false, nil
	}
	if err := queueChanges(c, t, want, ch); err != nil {
		return false, err
	}
	if err := c.Flush(); err != nil {
		return false, wrap(fmt.Errorf("update nftables table %s (%s): %w", t.Name, ch, err))
	}
	return true, nil
}

// readTableObjects lists a table's chains and set names, and whether the
// table exists.
func readTableObjects(c *nftables.Conn, t *nftables.Table) (chains []*nftables.Chain, sets []string, present bool, err error) {
	ok, err := tableExists(c, t)
	if err != nil || !ok {
		return nil, nil, false, err
	}
	all, err := c.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return nil, nil, false, fmt.Errorf("list nftables chains: %w", err)
	}
	for _, ch := range all {
		if ch.Table.Name == t.Name {
			chains = append(chains, ch)
		}
	}
	ss, err := c.GetSets(t)
	if err != nil {
		return nil, nil, false, fmt.Errorf("list sets of nftables table %s: %w", t.Name, err)
	}
	for _, s := range ss {
		sets = append(sets, s.Name)
	}
	return chains, sets, true, nil
}

// basesMatch reports whether every base chain of want exists in chains
// with the same hook.
func basesMatch(chains []*nftables.Chain, want *ruleset) bool {
	for _, w := range want.chains {
		if w.Hooknum == nil {
			continue
		}
		i := slices.IndexFunc(chains, func(g *nftables.Chain) bool { return g.Name == w.Name })
		if i < 0 || !sameHook(chains[i], w) {
			return false
		}
	}
	return true
}

// readOwned reads the rules of the named chains and the elements of the
// named sets of table t.
func readOwned(c *nftables.Conn, t *nftables.Table, chains, sets []string) (owned, error) {
	o := owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}, held: map[string][]heldRule{}}
	for _, name := range chains {
		held, err := readHeld(c, t, name)
		if err != nil {
			return o, err
		}
		o.held[name] = held
		o.chains[name] = nil // present, maybe empty
		for _, r := range held {
			o.chains[name] = append(o.chains[name], r.exprs)
		}
	}
	for _, name := range sets {
		s, err := c.GetSetByName(t, name)
		if err != nil {
			return o, fmt.Errorf("nftables set %s/%s: %w", t.Name, name, err)
		}
		els, err := c.GetSetElements(s)
		if err != nil {
			return o, fmt.Errorf("list elements of set %s/%s: %w", t.Name, name, err)
		}
		o.sets[name] = els
	}
	return o, nil
}

// owned reads what the port h has in the kernel; remnants of a port without
// its main chain are queued for deletion, to be replaced whole.
func (st *portState) owned(c *nftables.Conn, t *nftables.Table, h string) (owned, error) {
	if len(st.chains) > 0 {
		return readOwned(c, t, st.chains, st.sets)
	}
	if _, err := st.queueDelete(c, h); err != nil {
		return owned{}, err
	}
	st.element = nil
	return owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}}, nil
}
