package sriov

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
)

// original is VF 1's state before the tests: none of it default, so that a
// restore to defaults would not pass for a restore to the originals.
func original() vfState {
	on, off, enable, min, max := true, false, uint32(1), uint32(5), uint32(50)
	return vfState{MAC: "02:00:00:00:0f:01", VLAN: &vfVLAN{ID: 7, QoS: 1, Proto: unix.ETH_P_8021Q},
		SpoofChk: &on, Trust: &off, LinkState: &enable, MinTxRate: &min, MaxTxRate: &max}
}

var allSettings = map[string]any{
	"mac": "02:00:00:00:10:01", "vlan": 100, "vlanQoS": 3, "vlanProto": "802.1ad",
	"spoofchk": "off", "trust": "on", "linkState": "disable", "minTxRate": 10, "maxTxRate": 100,
}

// wantAll is allSettings as the VF reports them.
func wantAll() vfState {
	on, off, disable, min, max := true, false, uint32(2), uint32(10), uint32(100)
	return vfState{MAC: "02:00:00:00:10:01", VLAN: &vfVLAN{ID: 100, QoS: 3, Proto: unix.ETH_P_8021AD},
		SpoofChk: &off, Trust: &on, LinkState: &disable, MinTxRate: &min, MaxTxRate: &max}
}

func TestVFSettingsSavedAndRestored(t *testing.T) {
	f := fakeFile(t, map[string]vfState{fakeKey("pf0", 1): original()}, "")
	r := newRig(t, "pf0", 2, &f)
	n := newNetwork(t, r, "10.42.0.0/24", allSettings)
	n["deviceID"] = vfAddr(1)
	conf := n.bytes(t)
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, conf, p, "net1")
	if got, _ := f.VF("pf0", 1); !reflect.DeepEqual(got, wantAll()) {
		t.Errorf("VF 1 after ADD: %+v, want %+v", got, wantAll())
	}
	if got, _ := f.VF("pf0", 0); !reflect.DeepEqual(got, defaultVF()) {
		t.Errorf("VF 0 was touched: %+v", got)
	}
	if got := podLink(t, p, "net1").Attrs().HardwareAddr.String(); got != "02:00:00:00:10:01" || resultIf(t, res).Mac != got {
		t.Errorf("pod netdev MAC %s, result %s; want the configured 02:00:00:00:10:01", got, resultIf(t, res).Mac)
	}
	st := recordedState(t, n, p)
	if want := original(); st.VF == nil || !reflect.DeepEqual(*st.VF, want) || st.PCI != vfAddr(1) || st.VFIndex != 1 || st.PF != "pf0" {
		t.Errorf("record keeps %+v (VF %+v), want VF 1 of pf0 with the originals %+v", st, st.VF, want)
	}
	if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	for _, tamper := range []vfState{{VLAN: &vfVLAN{ID: 100, QoS: 3, Proto: unix.ETH_P_8021Q}}, {Trust: new(bool)}, {MaxTxRate: new(uint32)}} {
		cur, _ := f.VF("pf0", 1)
		if err := f.SetVF("pf0", 1, tamper); err != nil {
			t.Fatal(err)
		}
		err := r.h.Check(t, pluginName, conf, res, p, "net1")
		if err == nil || !strings.Contains(err.Error(), "VF "+vfAddr(1)) {
			t.Errorf("CHECK with the VF changed to %+v: %v, want an error naming the VF", tamper, err)
		}
		if err := f.SetVF("pf0", 1, cur); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := r.h.Del(pluginName, conf, p, "net1"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := f.VF("pf0", 1); !reflect.DeepEqual(got, original()) {
		t.Errorf("VF 1 after DEL: %+v, want the originals %+v", got, original())
	}
	r.hostVF(t, 1)
}

// A setting the driver refuses fails the ADD, and every setting already
// made is put back.
func TestRefusedVFSettingRestoresTheOthers(t *testing.T) {
	f := fakeFile(t, map[string]vfState{fakeKey("pf0", 0): original()}, "trust")
	r := newRig(t, "pf0", 1, &f)
	n := newNetwork(t, r, "10.43.0.0/24", allSettings)
	p := cnitest.NewPod(t)
	_, err := r.h.Exec(p.Call(pluginName, "ADD", "net1", n.bytes(t)))
	cniErr(t, err, types.ErrInternal, "set trust of VF 0 on PF \"pf0\": operation not supported")
	if d := err.(*types.Error).Details; d != "" {
		t.Errorf("cleanup failed: %s", d)
	}
	if got, _ := f.VF("pf0", 0); !reflect.DeepEqual(got, original()) {
		t.Errorf("VF 0 after the failed ADD: %+v, want the originals %+v", got, original())
	}
	if len(records(t, n)) != 0 || p.NS.HasLink(t, "net1") {
		t.Errorf("the failed ADD left records %v or the netdev in the pod", records(t, n))
	}
	r.hostVF(t, 0)
}

// The egress rate goes to the VF's rate limiter, rounded up to Mbit/s, and
// no tbf shapes it too; the ingress rate is shaped in the pod.
func TestEgressRateOffloaded(t *testing.T) {
	f := fakeFile(t, nil, "")
	r := newRig(t, "pf0", 1, &f)
	n := newNetwork(t, r, "10.44.0.0/24", map[string]any{"offloadEgressRate": true, "minTxRate": 2,
		"qos":           map[string]any{"ingressRate": 4000000, "ingressBurst": 40000},
		"runtimeConfig": map[string]any{"bandwidth": map[string]any{"egressRate": 12500000, "egressBurst": 100000}}})
	conf := n.bytes(t)
	p := cnitest.NewPod(t)
	res := r.h.Add(t, pluginName, conf, p, "net1")
	vf, _ := f.VF("pf0", 0)
	if *vf.MaxTxRate != 13 || *vf.MinTxRate != 2 {
		t.Errorf("VF rates min %d max %d Mbit/s, want 2 and 13 (12.5 rounded up)", *vf.MinTxRate, *vf.MaxTxRate)
	}
	qs, err := p.NS.Handle(t).QdiscList(podLink(t, p, "net1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Type() == "tbf" {
			t.Errorf("egress is shaped by a tbf although offloaded: %+v", q)
		}
	}
	if !p.NS.HasLink(t, qosport.IFBName("net1")) {
		t.Error("no IFB for the ingress rate")
	}
	if err := r.h.Check(t, pluginName, conf, res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := r.h.Del(pluginName, conf, p, "net1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.VF("pf0", 0); !reflect.DeepEqual(got, defaultVF()) {
		t.Errorf("VF after DEL: %+v, want its defaults back", got)
	}
}

func recordedState(t *testing.T, n network, p *cnitest.Pod) *state {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n["dataDir"].(string), n["name"].(string), p.ID+".net1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec attach.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	st, err := stateOf(&rec)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// When the cleanup of a failed ADD cannot restore the VF, the record stays,
// and the DEL that follows puts the VF back.
func TestDelFinishesAFailedCleanup(t *testing.T) {
	f := fakeFile(t, map[string]vfState{fakeKey("pf0", 0): original()}, "")
	r := newRig(t, "pf0", 1, &f)
	n := newNetwork(t, r, "10.47.0.0/24", allSettings)
	conf := n.bytes(t)
	p := cnitest.NewPod(t)
	run(t, "ip", "-n", p.NS.Name, "link", "add", "net1", "type", "bridge") // the ADD fails after configuring the VF
	f.failFrom(t, 2)                                                       // and so does the VF's restore
	_, err := r.h.Exec(p.Call(pluginName, "ADD", "net1", conf))
	var e *types.Error
	if !errors.As(err, &e) || !strings.Contains(e.Details, "restore settings of VF "+vfAddr(0)) {
		t.Fatalf("ADD: %v; want a failure whose cleanup could not restore the VF", err)
	}
	if len(records(t, n)) != 1 {
		t.Fatalf("records %v: the failed cleanup must keep the record for DEL", records(t, n))
	}
	r.hostVF(t, 0) // the netdev came back all the same
	f.failFrom(t, 0)
	if err := r.h.Del(pluginName, conf, p, "net1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.VF("pf0", 0); !reflect.DeepEqual(got, original()) {
		t.Errorf("VF 0 after DEL: %+v, want the originals %+v", got, original())
	}
	if len(records(t, n)) != 0 || !p.NS.HasLink(t, "net1") {
		t.Errorf("after DEL: records %v; the pod's own net1 must stay", records(t, n))
	}
}
