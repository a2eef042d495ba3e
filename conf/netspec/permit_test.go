package netspec_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

func TestNotPermitted(t *testing.T) {
	labels := map[string]map[string]string{"paid": {"tier": "paid"}, "free": {"tier": "free"}}
	ns := func(name string) (map[string]string, bool) { l, ok := labels[name]; return l, ok }
	paid := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "paid"}}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "In"}}}
	ranges := []ncv1.IDRange{{First: 100, Last: 199}}
	for _, tc := range []struct {
		name      string
		typ       ncv1.NetworkType
		sel       *metav1.LabelSelector
		ids       []ncv1.IDRange
		namespace string
		vlan, vni *int32
		want      string // "" = permitted
	}{
		{name: "no limits", typ: ncv1.NetworkTypeVXLAN, namespace: "unknown", vni: i32(7)},
		{name: "selected", typ: ncv1.NetworkTypeVXLAN, sel: paid, namespace: "paid", vni: i32(7)},
		{name: "not selected", typ: ncv1.NetworkTypeVXLAN, sel: paid, namespace: "free", vni: i32(7), want: "namespace free is not selected"},
		{name: "unknown namespace", typ: ncv1.NetworkTypeVXLAN, sel: paid, namespace: "unknown", vni: i32(7), want: "namespace unknown is not selected"},
		{name: "empty selector selects all", typ: ncv1.NetworkTypeVXLAN, sel: &metav1.LabelSelector{}, namespace: "free", vni: i32(7)},
		{name: "invalid selector lets none in", typ: ncv1.NetworkTypeVXLAN, sel: bad, namespace: "paid", vni: i32(7), want: "spec.namespaceSelector of ClusterNetwork cn is invalid"},
		{name: "vni in range", typ: ncv1.NetworkTypeVXLAN, ids: ranges, namespace: "free", vni: i32(199)},
		{name: "vni outside", typ: ncv1.NetworkTypeVXLAN, ids: ranges, namespace: "free", vni: i32(200), want: "vni 200 is not in spec.segmentIds of ClusterNetwork cn"},
		{name: "vlan reads vlanId", typ: ncv1.NetworkTypeVLAN, ids: ranges, namespace: "free", vlan: i32(99), vni: i32(150), want: "vlanId 99 is not in spec.segmentIds"},
		{name: "no id: the type check says it", typ: ncv1.NetworkTypeVLAN, ids: ranges, namespace: "free", vni: i32(150)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "cn"},
				Spec: ncv1.ClusterNetworkSpec{Type: tc.typ, NamespaceSelector: tc.sel, SegmentIDs: tc.ids}}
			n := &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: "red"},
				Spec: ncv1.NetworkSpec{ClusterNetworkName: "cn", VLANID: tc.vlan, VNI: tc.vni}}
			got := netspec.NotPermitted(n, cn, ns)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if h := netspec.NetworkHolder(n, cn, ns); (h.Segment.Kind == "") != (tc.want != "" || (tc.typ == ncv1.NetworkTypeVLAN && tc.vlan == nil)) {
				t.Errorf("segment %v held while permitted=%v", h.Segment, got == "")
			}
		})
	}
}
