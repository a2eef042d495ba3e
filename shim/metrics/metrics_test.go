package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
	"github.com/netclass-dev/netclass/shim/status"
)

func newDRA(t *testing.T) (*DRA, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewDRA(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// histCount is the sample count of the histogram name with exactly labels.
func histCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if sameLabels(m.GetLabel(), labels) {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// fakePlugin answers Prepare with an error for the claims named in fail.
type fakePlugin struct {
	kubeletplugin.DRAPlugin
	fail map[types.UID]bool
	skip types.UID // a claim left out of the answer
	err  error
}

func (f fakePlugin) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		if c.UID == f.skip {
			continue
		}
		var err error
		if f.fail[c.UID] {
			err = errors.New("boom")
		}
		out[c.UID] = kubeletplugin.PrepareResult{Err: err}
	}
	return out, f.err
}

func (f fakePlugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		if f.fail[c.UID] {
			out[c.UID] = errors.New("boom")
		} else {
			out[c.UID] = nil
		}
	}
	return out, f.err
}

func claim(uid string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: "ns", Name: uid}}
}

func TestPrepareAndUnprepareAreCountedPerClaim(t *testing.T) {
	m, reg := newDRA(t)
	p := m.DRAPlugin(fakePlugin{fail: map[types.UID]bool{"b": true}, skip: "c"})
	if _, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim("a"), claim("b"), claim("c"), claim("d")}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "a"}, {UID: "d"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op, result string
		want       float64
	}{{Prepare, Success, 2}, {Prepare, Error, 2}, {Unprepare, Success, 2}, {Unprepare, Error, 0}} {
		if got := testutil.ToFloat64(m.claims.WithLabelValues(c.op, c.result)); got != c.want {
			t.Errorf("netclass_dra_claims_total{operation=%s,result=%s} = %v, want %v", c.op, c.result, got, c.want)
		}
	}
	if n := histCount(t, reg, "netclass_dra_request_duration_seconds", map[string]string{"operation": Prepare, "result": Error}); n != 1 {
		t.Errorf("prepare requests with an error = %d, want 1 (one call, two claims failed)", n)
	}
	if n := histCount(t, reg, "netclass_dra_request_duration_seconds", map[string]string{"operation": Unprepare, "result": Success}); n != 1 {
		t.Errorf("successful unprepare requests = %d, want 1", n)
	}
}

func TestAFailedCallFailsEveryClaim(t *testing.T) {
	m, _ := newDRA(t)
	p := m.DRAPlugin(fakePlugin{err: errors.New("down")})
	_, _ = p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "a"}, {UID: "b"}})
	if got := testutil.ToFloat64(m.claims.WithLabelValues(Unprepare, Error)); got != 2 {
		t.Errorf("claims of a failed call counted as errors: %v, want 2", got)
	}
}

func TestHooks(t *testing.T) {
	m, reg := newDRA(t)
	m.ObserveHook("RunPodSandbox", Success, 30*time.Millisecond)
	m.ObserveHook("RunPodSandbox", Success, 40*time.Millisecond)
	m.ObserveHook("RunPodSandbox", Skipped, time.Microsecond)
	m.ObserveHook("StopPodSandbox", Error, time.Second)
	if got := testutil.ToFloat64(m.hooks.WithLabelValues("RunPodSandbox", Success)); got != 2 {
		t.Errorf("RunPodSandbox successes = %v, want 2", got)
	}
	if n := histCount(t, reg, "netclass_nri_hook_duration_seconds", map[string]string{"hook": "StopPodSandbox", "result": Error}); n != 1 {
		t.Errorf("StopPodSandbox error latency samples = %d, want 1", n)
	}
	var nilDRA *DRA
	nilDRA.ObserveHook("RunPodSandbox", Success, 0) // a daemon without metrics
}

type fakeCNI struct{ err error }

func (f fakeCNI) Add(context.Context, []byte, cni.Attachment) (cni.Result, error) {
	return cni.Result{InterfaceName: "net1"}, f.err
}
func (f fakeCNI) Del(context.Context, []byte, cni.Attachment) error  { return f.err }
func (f fakeCNI) GC(context.Context, []byte, []cni.Attachment) error { return f.err }
func (f fakeCNI) Cached([]byte, cni.Attachment) (cni.Result, bool, error) {
	return cni.Result{}, false, f.err
}
func confList(types ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"cniVersion":"1.1.0","name":"blue","plugins":[`)
	for i, t := range types {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"type":"` + t + `"}`)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func TestCNIExecutionsByMainPluginAndVerb(t *testing.T) {
	m, reg := newDRA(t)
	ok, bad := m.CNI(fakeCNI{}), m.CNI(fakeCNI{err: errors.New("exit 1")})
	ctx := context.Background()
	bridge := confList("netclass-bridge", "netclass-qos")
	if res, err := ok.Add(ctx, bridge, cni.Attachment{}); err != nil || res.InterfaceName != "net1" {
		t.Fatalf("Add through the decorator = %+v, %v", res, err)
	}
	_, _ = bad.Add(ctx, confList("netclass-vxlan"), cni.Attachment{})
	_ = ok.Del(ctx, bridge, cni.Attachment{})
	_ = ok.GC(ctx, confList("bridge"), nil)
	_, _, _ = ok.Cached(bridge, cni.Attachment{})
	for _, c := range []struct {
		plugin, verb, result string
		want                 float64
	}{
		{"netclass-bridge", "ADD", Success, 1}, {"netclass-vxlan", "ADD", Error, 1},
		{"netclass-bridge", "DEL", Success, 1}, {OtherPlugin, "GC", Success, 1},
	} {
		if got := testutil.ToFloat64(m.cniExecs.WithLabelValues(c.plugin, c.verb, c.result)); got != c.want {
			t.Errorf("netclass_cni_execs_total{%s,%s,%s} = %v, want %v", c.plugin, c.verb, c.result, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.cniExecs); n != 4 {
		t.Errorf("%d CNI series, want 4 (reading the result cache executes nothing)", n)
	}
	if n := histCount(t, reg, "netclass_cni_exec_duration_seconds", map[string]string{"plugin": "netclass-vxlan", "verb": "ADD", "result": Error}); n != 1 {
		t.Errorf("failed vxlan ADD latency samples = %d, want 1", n)
	}
}

func TestMainPlugin(t *testing.T) {
	for in, want := range map[string]string{
		string(confList("netclass-sriov")):                "netclass-sriov",
		string(confList("netclass-qos")):                  OtherPlugin,
		string(confList("netclass-bridge", "portmap")):    "netclass-bridge",
		string(confList("../../../../x")):                 OtherPlugin,
		`{"plugins":[]}`:                                  OtherPlugin,
		`not json`:                                        OtherPlugin,
		`{"type":"netclass-bridge"}`:                      OtherPlugin,
		string(confList("netclass-vlan", "netclass-qos")): "netclass-vlan",
	} {
		if got := MainPlugin([]byte(in)); got != want {
			t.Errorf("MainPlugin(%s) = %q, want %q", in, got, want)
		}
	}
}

type fakeSink struct{ err error }

func (f fakeSink) PublishResources(context.Context, resourceslice.DriverResources) error {
	return f.err
}

func devices(n int) []resourceapi.Device {
	return make([]resourceapi.Device, n)
}

func TestPublishedDevices(t *testing.T) {
	m, _ := newDRA(t)
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		"node": {Slices: []resourceslice.Slice{{Devices: devices(128)}, {Devices: devices(3)}}},
	}}
	if err := m.Sink(fakeSink{}).PublishResources(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	_ = m.Sink(fakeSink{err: errors.New("conflict")}).PublishResources(context.Background(), resourceslice.DriverResources{})
	if got := testutil.ToFloat64(m.devices); got != 131 {
		t.Errorf("netclass_published_devices = %v, want 131 (a failed publication changes nothing)", got)
	}
	if got := testutil.ToFloat64(m.publications.WithLabelValues(Error)); got != 1 {
		t.Errorf("failed publications = %v, want 1", got)
	}
}

type fakeStatus struct{ err error }

func (f fakeStatus) Write(context.Context, string, string, []status.Entry) error { return f.err }

func TestStatusWrites(t *testing.T) {
	m, reg := newDRA(t)
	_ = m.StatusWriter(fakeStatus{}).Write(context.Background(), "ns", "c", nil)
	if err := m.StatusWriter(fakeStatus{err: errors.New("forbidden")}).Write(context.Background(), "ns", "c", nil); err == nil {
		t.Fatal("the decorator swallowed the error")
	}
	if got := testutil.ToFloat64(m.statusWrites.WithLabelValues(Error)); got != 1 {
		t.Errorf("failed status writes = %v, want 1", got)
	}
	if n := histCount(t, reg, "netclass_status_write_duration_seconds", map[string]string{"result": Success}); n != 1 {
		t.Errorf("successful status write latency samples = %d, want 1", n)
	}
}

type records []*checkpoint.Claim

func (r records) List() []*checkpoint.Claim { return r }

func TestCheckpointCollector(t *testing.T) {
	blue := attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"}
	red := attachment.NetworkRef{Class: "netclass-networks", Kind: "Network", Namespace: "tenant", Name: "red"}
	attached := func(sandbox string) checkpoint.Attachment {
		return checkpoint.Attachment{SandboxID: sandbox, State: checkpoint.Attached}
	}
	recs := records{
		{UID: "1", Devices: []checkpoint.Device{{Network: blue, Attachments: []checkpoint.Attachment{attached("s1")}}}},
		{UID: "2", Devices: []checkpoint.Device{
			{Network: blue, Attachments: []checkpoint.Attachment{attached("s2"), {SandboxID: "s3", State: checkpoint.Adding}}},
			{Network: red, Attachments: []checkpoint.Attachment{attached("s2")}},
		}},
		{UID: "3", Devices: []checkpoint.Device{{Network: red}}}, // prepared, not attached yet
	}
	want := `
# HELP netclass_attachments Pod interfaces attached (state Attached in the checkpoint), per network object: kind, namespace (empty for cluster-scoped kinds) and name.
# TYPE netclass_attachments gauge
netclass_attachments{kind="Network",namespace="tenant",network="red"} 1
netclass_attachments{kind="PodNetwork",namespace="",network="blue"} 2
# HELP netclass_checkpoint_records ResourceClaims prepared on this node: records in netclass-dra's checkpoint.
# TYPE netclass_checkpoint_records gauge
netclass_checkpoint_records 3
`
	if err := testutil.CollectAndCompare(NewCheckpoint(recs), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCheckpoint(recs)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// Every series is netclass_* and passes Prometheus' lint.
func TestNamesAndLint(t *testing.T) {
	m, reg := newDRA(t)
	m.ObserveHook("RunPodSandbox", Success, time.Millisecond)
	_ = m.StatusWriter(fakeStatus{}).Write(context.Background(), "", "", nil)
	_ = m.Sink(fakeSink{}).PublishResources(context.Background(), resourceslice.DriverResources{})
	m.SetAside(2)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "netclass_") {
			t.Errorf("series %s is not named netclass_*", f.GetName())
		}
	}
	if got := testutil.ToFloat64(m.setAside); got != 2 {
		t.Errorf("set-aside records = %v", got)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
	if _, err := NewDRA(reg); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
}
