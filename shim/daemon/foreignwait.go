package daemon

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/api/contract"
)

// NetworkStatusGrace is how long a netclass attachment Multus made may go
// without the pod's network-status naming its NetworkAttachmentDefinition
// before the pod gets a Warning Event: Multus writes the annotation right
// after the pod's ADDs (a few hundred milliseconds on the test bed).
const NetworkStatusGrace = 30 * time.Second

// waitingAttachment is a netclass attachment Multus made whose pod's
// network-status does not (yet) name its NetworkAttachmentDefinition: the
// agent cannot tell its network, so no policy or NetworkQoS reaches it.
type waitingAttachment struct {
	pod    *corev1.Pod
	key    string // sandbox/interface
	ifName string
	// closed: the port started closed (portSecurity.startClosed): it passes
	// nothing until the agent's first sync of it opens it.
	closed bool
	why    string // multus.Unnamed
}

// message is the Event's.
func (w waitingAttachment) message() string {
	closed := ""
	if w.closed {
		closed = "; it started closed (portSecurity.startClosed): unless the agent opened it before, it passes nothing"
	}
	return "interface " + w.ifName + ", made by a netclass plugin for Multus, gets no NetworkPolicy or NetworkQoS change" + closed +
		", until the pod's network-status names its NetworkAttachmentDefinition: " + w.why
}

// unnamedReporter gives a pod one Warning Event (ReasonNetworkStatusMissing)
// per attachment that has waited NetworkStatusGrace, as the agent's syncs
// see them: a sync is scheduled (recheck) for when the first grace ends,
// since nothing else may ask for one; at most one is pending, however
// often a pod's annotation flaps.
type unnamedReporter struct {
	grace   time.Duration
	now     func() time.Time
	after   func(time.Duration, func())
	recheck func()
	events  record.EventRecorder

	mu    sync.Mutex
	since map[string]time.Time // key -> first seen waiting
	told  map[string]bool      // keys whose pod got the Event
	due   time.Time            // when the scheduled sync is (none pending once past)
}

func newUnnamedReporter(events record.EventRecorder, recheck func()) *unnamedReporter {
	return &unnamedReporter{grace: NetworkStatusGrace, now: time.Now,
		after:   func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		recheck: recheck, events: events, since: map[string]time.Time{}, told: map[string]bool{}}
}

// observe takes the attachments waiting now; those no longer waiting are
// forgotten (one that waits again later is told again).
func (r *unnamedReporter) observe(waiting []waitingAttachment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	present := make(map[string]bool, len(waiting))
	for _, w := range waiting {
		present[w.key] = true
		first, seen := r.since[w.key]
		switch {
		case !seen:
			r.since[w.key] = now
		case now.Sub(first) >= r.grace && !r.told[w.key]:
			r.told[w.key] = true
			r.events.Event(w.pod, corev1.EventTypeWarning, contract.ReasonNetworkStatusMissing, w.message())
		}
	}
	for key := range r.since {
		if !present[key] {
			delete(r.since, key)
			delete(r.told, key)
		}
	}
	r.schedule(now)
}

// schedule asks for a sync when the first grace still running ends, unless
// one is pending for then or before (its sync schedules the next).
func (r *unnamedReporter) schedule(now time.Time) {
	var next time.Time
	for key, first := range r.since {
		if end := first.Add(r.grace); !r.told[key] && end.After(now) && (next.IsZero() || end.Before(next)) {
			next = end
		}
	}
	if next.IsZero() || (r.due.After(now) && !r.due.After(next)) {
		return
	}
	r.due = next
	r.after(next.Sub(now), r.recheck)
}
