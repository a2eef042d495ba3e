package nodenetwork

import (
	"context"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncapply "github.com/netclass-dev/netclass/api/generated/applyconfigurations/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

type fakeHost struct {
	links map[string]Link
	vlan  bool
}

func (f fakeHost) Link(name string) (Link, bool) { l, ok := f.links[name]; return l, ok }
func (f fakeHost) LinkWithAddress(a netip.Addr) (Link, bool) {
	for _, l := range f.links {
		for _, have := range l.Addrs {
			if have == a {
				return l, true
			}
		}
	}
	return Link{}, false
}
func (f fakeHost) VLANSupported() bool { return f.vlan }

func i32(v int32) *int32 { return &v }

func host() fakeHost {
	return fakeHost{vlan: true, links: map[string]Link{
		"eth1": {Name: "eth1", Up: true, MTU: 1500, Addrs: []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("192.0.2.1")}},
		"eth2": {Name: "eth2", Up: false, MTU: 9000},
		"eth3": {Name: "eth3", Up: true, MTU: 1500},
	}}
}

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   ncv1.Options
		host   fakeHost
		node   Node
		reason string
		master string
		local  string
		mtu    int
	}{
		{name: "vlan", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1"}}, reason: "Ready", master: "eth1", mtu: 1500},
		{name: "vlan mtu", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1", MTU: i32(1400)}}, reason: "Ready", master: "eth1", mtu: 1400},
		{name: "vlan mtu too large", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1", MTU: i32(9000)}}, reason: ncv1.ReasonMTUTooLarge},
		{name: "vlan master missing", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth9"}}, reason: ncv1.ReasonMasterNotFound},
		{name: "vlan master down", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth2"}}, reason: ncv1.ReasonMasterDown},
		{name: "vlan kernel", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1"}}, host: fakeHost{links: host().links}, reason: ncv1.ReasonKernelUnsupported},
		{name: "vxlan master v4", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Master: "eth1"}}, reason: "Ready", master: "eth1", local: "192.0.2.1", mtu: 1450},
		{name: "vxlan master v6 remotes", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Master: "eth1", Remotes: []ncv1.IPAddress{"fd00::2"}}},
			reason: "Ready", master: "eth1", local: "fd00::1", mtu: 1430},
		{name: "vxlan master without address", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Master: "eth3"}}, reason: ncv1.ReasonLocalAddressNotFound},
		{name: "vxlan local", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Local: "192.0.2.1", MTU: i32(1400)}}, reason: "Ready", master: "eth1", local: "192.0.2.1", mtu: 1400},
		{name: "vxlan local absent", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Local: "192.0.2.99"}}, reason: ncv1.ReasonLocalAddressNotFound},
		{name: "vxlan mtu too large", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Master: "eth1", MTU: i32(1500)}}, reason: ncv1.ReasonMTUTooLarge},
		{name: "no options", opts: ncv1.Options{}, reason: ncv1.ReasonInvalidConfig},
		{name: "vxlan left to the node: the InternalIP's device", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{Remotes: []ncv1.IPAddress{"192.0.2.7"}}},
			node: Node{InternalIP: netip.MustParseAddr("192.0.2.1")}, reason: "Ready", master: "eth1", local: "192.0.2.1", mtu: 1450},
		{name: "vlan left to the node: the InternalIP's device", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{}},
			node: Node{InternalIP: netip.MustParseAddr("fd00::1")}, reason: "Ready", master: "eth1", mtu: 1500},
		{name: "left to a node without an InternalIP", opts: ncv1.Options{VXLAN: &ncv1.VXLANOptions{}}, reason: ncv1.ReasonMasterNotFound},
		{name: "left to a node whose InternalIP no device has", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{}},
			node: Node{InternalIP: netip.MustParseAddr("198.51.100.1")}, reason: ncv1.ReasonMasterNotFound},
		{name: "both", opts: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1"}, VXLAN: &ncv1.VXLANOptions{Master: "eth1"}}, reason: ncv1.ReasonInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.host
			if h.links == nil {
				h = host()
			}
			v := Evaluate(&ncv1.NodeNetwork{Spec: ncv1.NodeNetworkSpec{Options: tc.opts}}, h, tc.node)
			if v.Reason != tc.reason || v.Ready != (tc.reason == "Ready") || v.Master != tc.master || v.LocalAddress != tc.local || v.MTU != tc.mtu {
				t.Fatalf("verdict %+v", v)
			}
			if v.Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

type fakeAPI struct {
	applied []*ncapply.NodeNetworkApplyConfiguration
}

func (f *fakeAPI) ApplyStatus(_ context.Context, nn *ncapply.NodeNetworkApplyConfiguration, opts metav1.ApplyOptions) (*ncv1.NodeNetwork, error) {
	if opts.FieldManager != "netclass.dev" || !opts.Force {
		panic("wrong apply options")
	}
	f.applied = append(f.applied, nn)
	return &ncv1.NodeNetwork{}, nil
}

func TestReport(t *testing.T) {
	api := &fakeAPI{}
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &Reporter{API: api, Host: host(), Now: func() time.Time { return earlier.Add(time.Hour) }}
	nn := &ncv1.NodeNetwork{ObjectMeta: metav1.ObjectMeta{Name: "trunk.node", Generation: 2},
		Spec: ncv1.NodeNetworkSpec{Options: ncv1.Options{VLAN: &ncv1.VLANOptions{Master: "eth1"}}}}
	if err := r.Report(context.Background(), nn, Node{Index: -1}); err != nil {
		t.Fatal(err)
	}
	if len(api.applied) != 1 {
		t.Fatalf("applied %d times", len(api.applied))
	}
	st := api.applied[0].Status
	if *st.Master != "eth1" || *st.MTU != 1500 || *st.ObservedGeneration != 2 || *st.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("status %+v", st)
	}
	// The same verdict again: nothing to write.
	nn.Status = ncv1.NodeNetworkStatus{ObservedGeneration: 2, Master: "eth1", MTU: i32(1500),
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready",
			Message: *st.Conditions[0].Message, ObservedGeneration: 2, LastTransitionTime: earlier}}}
	if err := r.Report(context.Background(), nn, Node{Index: -1}); err != nil || len(api.applied) != 1 {
		t.Fatalf("unchanged status written again (%d applies, %v)", len(api.applied), err)
	}
	// A new message with the same status keeps the transition time.
	r.Host = fakeHost{vlan: true, links: map[string]Link{"eth1": {Name: "eth1", Up: true, MTU: 9000}}}
	if err := r.Report(context.Background(), nn, Node{Index: -1}); err != nil || len(api.applied) != 2 {
		t.Fatal("changed MTU not written")
	}
	// The node index assigned: written.
	nn.Status.MTU = i32(9000)
	nn.Status.Conditions[0].Message = *api.applied[1].Status.Conditions[0].Message
	if err := r.Report(context.Background(), nn, Node{Index: 3}); err != nil || len(api.applied) != 3 || *api.applied[2].Status.NodeIndex != 3 {
		t.Fatalf("node index not written (%d applies, %v)", len(api.applied), err)
	}
	if got := api.applied[1].Status.Conditions[0].LastTransitionTime; !got.Equal(&earlier) {
		t.Fatalf("transition time moved to %v", got)
	}
}
