// Package sandboxes is netclass-dra's record of the node's pod sandboxes
// and their network namespaces, as the runtime reports them through NRI
// (Synchronize, RunPodSandbox, StopPodSandbox, RemovePodSandbox): every
// pod of the node, with or without netclass attachments, so that the rule
// agent can find a pod's primary interface (eth0) without asking the
// kernel or the runtime. It is memory only: NRI's Synchronize gives it
// back whole after a restart. Recording a sandbox costs a map write; it
// never touches the kernel.
package sandboxes

import (
	"cmp"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Sandbox is a running pod sandbox with a network namespace of its own.
type Sandbox struct {
	Pod types.NamespacedName
	UID types.UID
	// ID is the runtime's sandbox ID.
	ID string
	// NetNS is the path of its network namespace.
	NetNS string
}

// Record holds the node's sandboxes by pod UID and sandbox ID: a pod has
// one running sandbox, but the runtime's list (Synchronize) may name a
// stopped one of the same pod too, whose namespace is gone (its reader
// skips it). The zero value is empty and ready; OnChange, when set, is
// called after each change (outside the lock).
type Record struct {
	OnChange func()

	mu           sync.Mutex
	pods         map[string]Sandbox
	synchronized bool
}

func key(uid types.UID, id string) string { return string(uid) + "/" + id }

// Started records a sandbox; one without a network namespace of its own
// (host network) is not recorded, and replaces nothing.
func (r *Record) Started(s Sandbox) {
	if s.NetNS == "" || s.UID == "" {
		return
	}
	r.mu.Lock()
	if r.pods == nil {
		r.pods = map[string]Sandbox{}
	}
	r.pods[key(s.UID, s.ID)] = s
	r.mu.Unlock()
	r.changed()
}

// Stopped forgets the pod's sandbox id (its network is torn down); a
// later sandbox of the same pod is kept.
func (r *Record) Stopped(uid types.UID, id string) {
	r.mu.Lock()
	_, ok := r.pods[key(uid, id)]
	delete(r.pods, key(uid, id))
	r.mu.Unlock()
	if ok {
		r.changed()
	}
}

// Replace sets the record to the runtime's list (NRI Synchronize).
func (r *Record) Replace(list []Sandbox) {
	pods := make(map[string]Sandbox, len(list))
	for _, s := range list {
		if s.NetNS != "" && s.UID != "" {
			pods[key(s.UID, s.ID)] = s
		}
	}
	r.mu.Lock()
	r.pods, r.synchronized = pods, true
	r.mu.Unlock()
	r.changed()
}

// Synchronized reports whether the runtime's whole list was given
// (Replace): until then the record may lack running pods.
func (r *Record) Synchronized() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synchronized
}

// List returns the sandboxes, by pod.
func (r *Record) List() []Sandbox {
	r.mu.Lock()
	out := make([]Sandbox, 0, len(r.pods))
	for _, s := range r.pods {
		out = append(out, s)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Sandbox) int {
		return cmp.Or(cmp.Compare(a.Pod.String(), b.Pod.String()), cmp.Compare(a.UID, b.UID), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (r *Record) changed() {
	if r.OnChange != nil {
		r.OnChange()
	}
}
