package qos

import (
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// The queue under an attachment's shapers (`qos.queue`). What a shaper holds
// back waits there: tbf alone keeps one FIFO, in which every packet of the
// pod waits behind whatever a bulk flow queued (up to TBFLatencySeconds);
// fq_codel under the tbf gives each flow its own queue, serves sparse flows
// first and keeps each queue's standing delay near 5 ms by marking
// ECN-capable packets (dropping the others); cake replaces the tbf with
// its own shaper and does the same per flow.
const (
	QueueFQCodel = "fq_codel"
	QueueCake    = "cake"
	QueueTBF     = "tbf"
	// DefaultQueue is the queue when the configuration names none. On a
	// kernel without it the shapers fall back to tbf alone, with a warning.
	DefaultQueue = QueueFQCodel
)

// Queues lists the values of `qos.queue`.
var Queues = []string{QueueFQCodel, QueueCake, QueueTBF}

func validateQueue(p field.Path, q string) []error {
	for _, v := range Queues {
		if q == "" || q == v {
			return nil
		}
	}
	var errs field.Errors
	errs.Add(p, "must be one of %s, got %q", strings.Join(Queues, ", "), q)
	return errs
}

// queueOf is the queue a spec asks for, and whether it names it.
func queueOf(s *Spec) (string, bool) {
	if s == nil || s.Queue == "" {
		return DefaultQueue, false
	}
	return s.Queue, true
}
