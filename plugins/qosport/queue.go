package qosport

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/tc"
)

// shape makes s the shaper of l's egress with the plan's queue under it
// (what: whose traffic, for messages). A kernel without the queue: the
// configuration's explicit choice is an error (CNI 7, *tc.MissingQdiscError);
// the default falls back to tbf alone, with a warning on stderr, never
// silently.
func shape(l netlink.Link, what string, s *qos.Shaper, plan *qos.Plan) error {
	err := tc.SetShaper(l.Attrs().Index, tbf(s), plan.Queue)
	var m *tc.MissingQdiscError
	if !errors.As(err, &m) || plan.ExplicitQueue {
		return err
	}
	attach.Warn("%s is shaped by tbf alone: this kernel has no %s qdisc, qos.queue's default (its packets wait behind the shaper in one FIFO, "+
		"up to %.0f ms); set qos.queue to tbf to choose this without the warning, or load sch_%s", what, m.Kind, qos.TBFLatencySeconds*1000, m.Kind)
	return tc.SetShaper(l.Attrs().Index, tbf(s), qos.QueueTBF)
}

// checkShaper verifies what shape made: the plan's queue, or, for the
// default queue on a kernel without it, tbf alone.
func checkShaper(l netlink.Link, s *qos.Shaper, plan *qos.Plan) error {
	err := tc.CheckShaper(l, tbf(s), plan.Queue)
	if err == nil || plan.ExplicitQueue {
		return err
	}
	has, herr := tc.HasQdisc(plan.Queue)
	if herr != nil || has {
		return errors.Join(err, herr)
	}
	if err := tc.CheckShaper(l, tbf(s), qos.QueueTBF); err != nil {
		return fmt.Errorf("%w (this kernel has no %s: tbf alone is expected)", err, plan.Queue)
	}
	return nil
}
