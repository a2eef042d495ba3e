package qosport

import (
	"github.com/netclass-dev/netclass/conf/qos"
)

// Check verifies every qdisc, filter and rule the plan needs is in place and
// unchanged, wherever Apply put it.
func Check(a Attachment, plan *qos.Plan) error {
	if plan.IsZero() {
		return nil
	}
	host, port, err := hostPort(a)
	if err != nil {
		return err
	}
	if port {
		return checkHost(a, host, plan)
	}
	return checkPod(a, host, plan)
}
