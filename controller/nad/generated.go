package nad

import (
	"slices"
	"sync"
)

// Generated is what the last sync found of the generated NADs, by network
// ("<namespace>/<name>" a Network, "<name>" a PodNetwork): the network
// reconcilers hold a deleted network's finalizer while one of its NADs
// exists (a pod attached through it still names it, so the NAD's own
// finalizer holds it), so that its segment stays its own.
type Generated struct {
	mu     sync.Mutex
	known  bool
	nads   map[string][]string
	notify []func(networks []string)
}

// NewGenerated is a Generated that knows nothing yet.
func NewGenerated() *Generated { return &Generated{} }

// Of returns the generated NADs of the network ("<namespace>/<name>") the
// last sync found, and whether a sync has run (else nothing is known).
func (g *Generated) Of(network string) ([]string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.nads[network]), g.known
}

// Notify registers f, called with the networks whose NADs changed after a
// sync, or with nil after the first one (every network may have changed).
// Register before the controller runs.
func (g *Generated) Notify(f func(networks []string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.notify = append(g.notify, f)
}

// set records a sync's findings and tells the subscribers what changed.
func (g *Generated) set(nads map[string][]string) {
	g.mu.Lock()
	var changed []string
	for n, keys := range nads {
		if !slices.Equal(g.nads[n], keys) {
			changed = append(changed, n)
		}
	}
	for n := range g.nads {
		if _, ok := nads[n]; !ok {
			changed = append(changed, n)
		}
	}
	first := !g.known
	g.known, g.nads = true, nads
	subs := slices.Clone(g.notify)
	g.mu.Unlock()
	if first {
		changed = nil
	} else if len(changed) == 0 {
		return
	}
	for _, f := range subs {
		f(changed)
	}
}

// byNetwork groups generated NADs ("<namespace>/<name>" keys) by the network
// their annotation names, each list sorted.
func byNetwork(owned map[string]string) map[string][]string {
	out := map[string][]string{}
	for key, network := range owned {
		out[network] = append(out[network], key)
	}
	for _, keys := range out {
		slices.Sort(keys)
	}
	return out
}
