package render

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

// Memo resolves a destination once per namespace and network; another
// namespace, network or selector is resolved on its own.
func TestMemoResolvesEachDestinationOnce(t *testing.T) {
	web := ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	db := ncv1.Destination{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}
	blue := network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "blue"}}
	red := network.Network{Ref: attachment.NetworkRef{Kind: "PodNetwork", Name: "red"}}
	inner := &countingPeers{addrs: addrs(3)}
	m := Memo(inner)
	for _, c := range []struct {
		ns    string
		to    ncv1.Destination
		net   network.Network
		calls int // resolutions reaching inner so far
	}{
		{"t1", web, blue, 1},
		{"t1", web, blue, 1},
		{"t2", web, blue, 2},
		{"t1", web, red, 3},
		{"t1", db, blue, 4},
		{"t1", db, blue, 4},
	} {
		got, err := m.Addresses(c.ns, c.to, c.net)
		if err != nil || len(got) != 3 {
			t.Fatalf("%s %v on %s: %v, %v", c.ns, c.to.PodSelector.MatchLabels, c.net.Ref, got, err)
		}
		if inner.calls != c.calls {
			t.Fatalf("%s %v on %s: %d resolutions, want %d", c.ns, c.to.PodSelector.MatchLabels, c.net.Ref, inner.calls, c.calls)
		}
	}
	if Memo(nil) != nil {
		t.Error("a memo of no resolver resolves")
	}
}
