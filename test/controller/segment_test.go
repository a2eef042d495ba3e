//go:build testbed

package controller_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/controller/condition"
)

// testSegmentSameSecond: a PodNetwork holding its bridge keeps it when another
// asks for the same bridge in the same second, though the newcomer's name
// sorts first (creation timestamps count whole seconds; the tie goes to the
// one the controller found holding the segment). Pairs are made until one
// shares a creation second; none in ten attempts fails the test.
func testSegmentSameSecond(t *testing.T, e *env) {
	for attempt := range 10 {
		bridge := fmt.Sprintf("ss%s%d", e.suffix, attempt)
		first, late := e.name(fmt.Sprintf("zz-first%d", attempt)), e.name(fmt.Sprintf("aa-late%d", attempt))
		e.createPodNetwork(t, first, contract.Provider, bridgeParams(bridge))
		a := waitFor(t, e, "PodNetwork "+first+" SegmentHeld", e.podNetwork(t, first), func(p *multinetworkv1.PodNetwork) (bool, string) {
			return hasCondition(p.Status.Conditions, "SegmentHeld", metav1.ConditionTrue, "SegmentHeld", p.Generation), describe(p.Status.Conditions, "SegmentHeld")
		})
		e.createPodNetwork(t, late, contract.Provider, bridgeParams(bridge))
		b, err := e.podNetwork(t, late)(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			continue // not the same second: another pair
		}
		got := waitReady(t, e, late, metav1.ConditionFalse, "SegmentConflict")
		if msg := condition.Get(got.Status.Conditions, "Ready").Message; !strings.Contains(msg, "bridge "+bridge+" is already used by PodNetwork "+first) {
			t.Errorf("%s: Ready message %q does not name %s", late, msg, first)
		}
		if held := describe(got.Status.Conditions, "SegmentHeld"); !strings.Contains(held, "SegmentHeld=False/SegmentConflict") {
			t.Errorf("%s: %s", late, held)
		}
		// The first one, re-evaluated since the newcomer arrived, still holds it.
		kept := waitReady(t, e, first, metav1.ConditionTrue, "Ready")
		if !hasCondition(kept.Status.Conditions, "SegmentHeld", metav1.ConditionTrue, "SegmentHeld", kept.Generation) {
			t.Errorf("%s: %s", first, describe(kept.Status.Conditions, "SegmentHeld"))
		}
		return
	}
	t.Fatal("no two PodNetworks created in the same second in 10 attempts")
}
