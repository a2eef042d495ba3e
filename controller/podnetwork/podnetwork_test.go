package podnetwork_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/podnetwork"
)

func pn(name string, enabled bool, params string, conds ...metav1.Condition) *multinetworkv1.PodNetwork {
	p := &multinetworkv1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3, CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec:       multinetworkv1.PodNetworkSpec{Enabled: enabled, Provider: "netclass.dev"},
		Status:     multinetworkv1.PodNetworkStatus{Conditions: conds},
	}
	if params != "" {
		p.Spec.Parameters = runtime.RawExtension{Raw: []byte(params)}
	}
	return p
}

const bridgeParams = `{"type":"netclass-bridge","bridge":"blue0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`

func older(p *multinetworkv1.PodNetwork) *multinetworkv1.PodNetwork {
	p.CreationTimestamp = metav1.NewTime(time.Unix(10, 0))
	return p
}

func TestReadyCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pn     *multinetworkv1.PodNetwork
		others []*multinetworkv1.PodNetwork
		status metav1.ConditionStatus
		reason string
		msgHas []string
	}{
		{name: "valid bridge", pn: pn("blue", true, bridgeParams), status: metav1.ConditionTrue, reason: "Ready"},
		{name: "disabled wins over invalid", pn: pn("blue", false, `{"type":"nope"}`), status: metav1.ConditionFalse, reason: "AdministrativelyDisabled", msgHas: []string{"spec.enabled"}},
		{name: "no parameters", pn: pn("blue", true, ""), status: metav1.ConditionFalse, reason: "InvalidParameters", msgHas: []string{"spec.parameters"}},
		{name: "a name no node can offer", pn: pn(strings.Repeat("b", 65), true, bridgeParams), status: metav1.ConditionFalse, reason: "NameTooLong", msgHas: []string{"65 characters", "at most 64"}},
		{name: "the longest name a node offers", pn: pn(strings.Repeat("b", 64), true, bridgeParams), status: metav1.ConditionTrue, reason: "Ready"},
		{name: "unknown type", pn: pn("blue", true, `{"type":"bridge"}`), status: metav1.ConditionFalse, reason: "InvalidParameters", msgHas: []string{"type"}},
		{
			name:   "every bad field named",
			pn:     pn("blue", true, `{"type":"netclass-bridge","bridge":"this-name-is-far-too-long","mtu":5,"ipam":{"type":"host-local"}}`),
			status: metav1.ConditionFalse, reason: "InvalidParameters", msgHas: []string{"bridge", "mtu"},
		},
		{
			name: "invalid bandwidth annotation, with invalid parameters",
			pn: func() *multinetworkv1.PodNetwork {
				p := pn("blue", true, `{"type":"netclass-bridge","bridge":"blue0","mtu":5,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`)
				p.Annotations = map[string]string{"netclass.dev/bandwidth": `{"capacity":"100M","max":"1G"}`}
				return p
			}(),
			status: metav1.ConditionFalse, reason: "InvalidParameters", msgHas: []string{"mtu", "metadata.annotations[netclass.dev/bandwidth].max: 1000000000 exceeds the capacity"},
		},
		{
			name: "valid bandwidth annotation",
			pn: func() *multinetworkv1.PodNetwork {
				p := pn("blue", true, bridgeParams)
				p.Annotations = map[string]string{"netclass.dev/bandwidth": `{"capacity":"100M","default":"30M"}`}
				return p
			}(),
			status: metav1.ConditionTrue, reason: "Ready",
		},
		{
			name:   "another False condition",
			pn:     pn("blue", true, bridgeParams, metav1.Condition{Type: "VendorCheck", Status: metav1.ConditionFalse}),
			status: metav1.ConditionFalse, reason: "ConditionsNotReady", msgHas: []string{"VendorCheck"},
		},
		{
			name: "bridge already held by an older podnetwork", pn: pn("blue", true, bridgeParams),
			others: []*multinetworkv1.PodNetwork{older(pn("azure", true, bridgeParams))},
			status: metav1.ConditionFalse, reason: "SegmentConflict", msgHas: []string{"bridge blue0 is already used by PodNetwork azure"},
		},
		{
			name: "the older one keeps it", pn: older(pn("azure", true, bridgeParams)),
			others: []*multinetworkv1.PodNetwork{pn("blue", true, bridgeParams)}, status: metav1.ConditionTrue, reason: "Ready",
		},
		{
			name:   "SegmentHeld False does not count (Ready says SegmentConflict)",
			pn:     pn("blue", true, bridgeParams, metav1.Condition{Type: "SegmentHeld", Status: metav1.ConditionFalse}),
			status: metav1.ConditionTrue, reason: "Ready",
		},
		{
			name:   "InUse False does not count",
			pn:     pn("blue", true, bridgeParams, metav1.Condition{Type: "InUse", Status: metav1.ConditionFalse}),
			status: metav1.ConditionTrue, reason: "Ready",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := podnetwork.ReadyCondition(tc.pn, netspec.Holders(append(tc.others, tc.pn), nil, nil, nil))
			if c.Type != "Ready" || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("got %s=%s/%s (%s), want %s/%s", c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason)
			}
			for _, s := range tc.msgHas {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not name %q", c.Message, s)
				}
			}
		})
	}
}

func TestInUseCondition(t *testing.T) {
	if c := podnetwork.InUseCondition(nil, false); c.Status != metav1.ConditionFalse || c.Reason != "NotInUse" {
		t.Errorf("no users: %+v", c)
	}
	c := podnetwork.InUseCondition([]string{"a/1", "a/2", "b/3", "b/4", "c/5", "c/6", "c/7"}, true)
	if c.Status != metav1.ConditionTrue || c.Reason != "InUse" {
		t.Fatalf("users: %+v", c)
	}
	for _, want := range []string{"used by 7", "a/1", "c/5", "and 2 more", "deletion waits"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if strings.Contains(c.Message, "c/6") {
		t.Errorf("message %q lists more than five claims", c.Message)
	}
}
