package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// A sync's duration goes by result; the attachments it left by state;
// rules left out and kernel updates are counted.
func TestAgentSyncs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewAgent(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveSync(30*time.Millisecond, []ruleagent.Outcome{
		{Changed: true, PolicyChanged: true},
		{PolicyChanged: true, PolicyIgnored: errors.New("egress[0]")},
		{Err: errors.New("netns gone")},
	})
	if held, failed, ne := testutil.ToFloat64(m.attachments.WithLabelValues(Held)), testutil.ToFloat64(m.attachments.WithLabelValues(Failed)),
		testutil.ToFloat64(m.notEnforced); held != 2 || failed != 1 || ne != 1 {
		t.Errorf("after the first sync: held %v, failed %v, not enforced %v; want 2, 1, 1", held, failed, ne)
	}
	m.ObserveSync(time.Millisecond, []ruleagent.Outcome{{}, {}})
	if n := histCount(t, reg, "netclass_agent_sync_duration_seconds", map[string]string{"result": Error}); n != 1 {
		t.Errorf("failed syncs = %d", n)
	}
	if n := histCount(t, reg, "netclass_agent_sync_duration_seconds", map[string]string{"result": Success}); n != 1 {
		t.Errorf("successful syncs = %d", n)
	}
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{testutil.ToFloat64(m.attachments.WithLabelValues(Held)), 2, "held (after the second sync)"},
		{testutil.ToFloat64(m.attachments.WithLabelValues(Failed)), 0, "failed (after the second sync)"},
		{testutil.ToFloat64(m.notEnforced), 0, "not enforced (after the second sync)"},
		{testutil.ToFloat64(m.updates.WithLabelValues(QoS)), 1, "qos updates"},
		{testutil.ToFloat64(m.updates.WithLabelValues(Policy)), 2, "policy updates"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	var none *Agent
	none.ObserveSync(time.Second, nil) // a nil *Agent records nothing
}
