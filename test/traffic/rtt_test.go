package traffic

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/nstest"
)

// Every echo over a veth pair between two fresh namespaces is answered
// and timed; to an address nobody holds, none is.
func TestRTTs(t *testing.T) {
	nstest.RequireRoot(t)
	a, b := nstest.New(t), nstest.New(t)
	nstest.Veth(t, a, "a0", "10.77.0.1/24", b, "b0", "10.77.0.2/24")
	if err := Ping(a, netip.MustParseAddr("10.77.0.2"), 10*time.Second); err != nil { // the link up, the neighbour known
		t.Fatal(err)
	}
	rtts, lost, err := RTTs(a, netip.MustParseAddr("10.77.0.2"), 5, 10*time.Millisecond)
	if err != nil || lost != 0 || len(rtts) != 5 {
		t.Fatalf("RTTs to the peer: %d answered, %d lost, %v; want 5, 0", len(rtts), lost, err)
	}
	for _, d := range rtts {
		if d <= 0 || d > time.Second {
			t.Errorf("round trip %v, want within (0, 1s]", d)
		}
	}
	rtts, lost, err = RTTs(a, netip.MustParseAddr("10.77.0.9"), 3, 10*time.Millisecond)
	if err != nil || lost != 3 || len(rtts) != 0 {
		t.Errorf("RTTs to nobody: %d answered, %d lost, %v; want 0, 3", len(rtts), lost, err)
	}
}
