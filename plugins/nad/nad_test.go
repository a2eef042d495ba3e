package nad_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/nad"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// bed is a host namespace with a rendered file of network blue/vx: a
// netclass-bridge list with a chained netclass-qos, as netclass-dra renders
// one, under a state directory of the test's.
type bed struct {
	h        *cnitest.Host
	stateDir string
	ipamDir  string
	file     []byte
	conf     []byte
	// records is netclass-bridge's dataDir (its attachments' records).
	records string
}

func newBed(t *testing.T) *bed {
	t.Helper()
	return newBedWith(t, map[string]bool{"mac": true})
}

// newBedWith is newBed with the bridge plugin's capabilities caps.
func newBedWith(t *testing.T, caps map[string]bool) *bed {
	t.Helper()
	b := &bed{h: cnitest.NewHost(t), stateDir: t.TempDir(), ipamDir: t.TempDir(), records: t.TempDir()}
	list := map[string]any{"cniVersion": "1.1.0", "name": "blue_vx", "plugins": []any{
		map[string]any{"type": "netclass-bridge", "bridge": "nadbr0", "dataDir": b.records,
			"capabilities": caps,
			"ipam":         map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": "10.77.0.0/24"}}}, "dataDir": b.ipamDir}},
		map[string]any{"type": "netclass-qos", "qos": map[string]any{"dscp": 10}, "dataDir": t.TempDir()},
	}}
	raw, _ := json.Marshal(list)
	file, err := nadfile.Encode(nadfile.Ref{Namespace: "blue", Name: "vx"}, raw)
	if err != nil {
		t.Fatal(err)
	}
	b.file = file
	b.write(t)
	b.conf = []byte(`{"cniVersion":"1.0.0","name":"vx","type":"netclass-nad","network":"blue/vx","stateDir":"` + b.stateDir + `"}`)
	return b
}

func (b *bed) write(t *testing.T) {
	t.Helper()
	path := nadfile.Path(b.stateDir, nadfile.Ref{Namespace: "blue", Name: "vx"})
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.file, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (b *bed) remove(t *testing.T) {
	t.Helper()
	if err := os.Remove(nadfile.Path(b.stateDir, nadfile.Ref{Namespace: "blue", Name: "vx"})); err != nil {
		t.Fatal(err)
	}
}

// bluePod is a pod of namespace blue, as the runtime (Multus) says in
// CNI_ARGS: the namespace of the bed's Network blue/vx.
func bluePod(t *testing.T) *cnitest.Pod {
	p := cnitest.NewPod(t)
	p.Args = "IgnoreUnknown=true;K8S_POD_NAMESPACE=blue;K8S_POD_NAME=p"
	return p
}

func podIP(t *testing.T, r *current.Result) netip.Addr {
	t.Helper()
	if len(r.IPs) == 0 {
		t.Fatalf("no address in %+v", r)
	}
	a, _ := netip.AddrFromSlice(r.IPs[0].Address.IP.To4())
	return a
}

func wantCode(t *testing.T, what string, err error, code uint, msg string) {
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) || te.Code != code || !strings.Contains(te.Msg+te.Details, msg) {
		t.Errorf("%s: error %v, want CNI code %d mentioning %q", what, err, code, msg)
	}
}

// Two pods attached through netclass-nad get what the rendered list makes
// (the bridge's veth and address, the chained qos plugin's result passed
// through, the caller's runtimeConfig reaching the plugin that declares
// it), reach each other, pass CHECK; the plugin's record names the NAD of
// the config, whatever NAD the caller's args say; DEL after the file is gone (the
// network no longer offered) still removes the attachment, from the list
// ADD used; ADD and STATUS without the file say the network is not offered.
func TestDelegatesToTheRenderedList(t *testing.T) {
	b := newBed(t)
	h := b.h
	pa, pb := bluePod(t), bluePod(t)
	withMAC := cnitest.WithField(t, b.conf, "runtimeConfig", map[string]any{"mac": "02:00:00:00:77:01"})
	withMAC = cnitest.WithField(t, withMAC, "nad", "blue/vx")
	withMAC = cnitest.WithField(t, withMAC, "args", map[string]any{nadfile.ArgsKey: map[string]string{"nad": "blue/forged"}})
	ra := h.Add(t, "netclass-nad", withMAC, pa, "net1")
	rb := h.Add(t, "netclass-nad", b.conf, pb, "net1")
	if ra.CNIVersion != "1.0.0" {
		t.Errorf("result version %s, want the caller's 1.0.0", ra.CNIVersion)
	}
	if got := pa.NS.Link(t, "net1").Attrs().HardwareAddr.String(); got != "02:00:00:00:77:01" {
		t.Errorf("runtimeConfig.mac did not reach the bridge plugin: MAC %s", got)
	}
	if err := traffic.Ping(pa.NS, podIP(t, rb), 5*time.Second); err != nil {
		t.Errorf("pod a -> pod b: %v", err)
	}
	if err := h.Check(t, "netclass-nad", withMAC, ra, pa, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	wantRecordedNAD(t, b.records, pa.ID, "blue/vx")
	wantRecordedNAD(t, b.records, pb.ID, "")
	b.remove(t)
	_, err := h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", b.conf))
	wantCode(t, "ADD of a network not offered", err, 11, "network blue/vx is not offered on this node")
	v11 := cnitest.WithField(t, b.conf, "cniVersion", "1.1.0") // STATUS and GC are CNI 1.1
	_, err = h.Exec(cnitest.Call{Plugin: "netclass-nad", Command: "STATUS", Conf: v11})
	wantCode(t, "STATUS of a network not offered", err, 50, "not offered")
	for i := range 2 {
		if err := h.Del("netclass-nad", withMAC, pa, "net1"); err != nil {
			t.Fatalf("DEL #%d without the file: %v", i+1, err)
		}
	}
	if pa.NS.HasLink(t, "net1") || h.NS.HasLink(t, bridgeport.HostVethName(pa.ID, "net1")) {
		t.Error("DEL left pod a's veth behind")
	}
	if _, err := os.Stat(filepath.Join(b.ipamDir, "blue_vx", podIP(t, ra).String())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DEL left pod a's address reserved (%v)", err)
	}
	b.write(t)
	if _, err := h.Exec(cnitest.Call{Plugin: "netclass-nad", Command: "STATUS", Conf: v11}); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	// GC is the generated NAD's alone (its config names itself as nad):
	// another NAD naming the network lists only its own attachments.
	for _, other := range [][]byte{v11, cnitest.WithField(t, v11, "nad", "blue/copy")} {
		if err := h.GC(t, "netclass-nad", other); err != nil {
			t.Fatalf("GC: %v", err)
		}
		if !h.NS.HasLink(t, bridgeport.HostVethName(pb.ID, "net1")) {
			t.Fatalf("GC of a NAD that is not the Network's (%s) removed pod b's veth", other)
		}
	}
	if err := h.GC(t, "netclass-nad", cnitest.WithField(t, v11, "nad", "blue/vx")); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if h.NS.HasLink(t, bridgeport.HostVethName(pb.ID, "net1")) {
		t.Error("GC without pod b among the valid attachments left its veth")
	}
}

// Configuration problems are CNI error 7 naming the field.
func TestInvalidConfiguration(t *testing.T) {
	b := newBed(t)
	_, err := b.h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", []byte(`{"cniVersion":"1.0.0","name":"vx","type":"netclass-nad","network":"Blue/vx"}`)))
	wantCode(t, "bad network", err, 7, "network: namespace \"Blue\"")
	_, err = b.h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", cnitest.WithField(t, b.conf, "runtimeConfig", map[string]any{"ips": []string{"10.77.0.9/24"}})))
	wantCode(t, "static IPs the network does not take", err, 7, "runtimeConfig.ips: network blue/vx does not allow static addresses")
	_, err = b.h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", cnitest.WithField(t, b.conf, "prevResult", map[string]any{"cniVersion": "1.0.0"})))
	wantCode(t, "with a prevResult", err, 7, "prevResult")
	if err := os.WriteFile(nadfile.Path(b.stateDir, nadfile.Ref{Namespace: "blue", Name: "vx"}), []byte(`{"version":"netclass.dev/nad/v0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = b.h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", b.conf))
	wantCode(t, "a file of another version", err, 7, "version")
}

// A static MAC or static IPs are refused on a network whose list takes
// none, whichever way the pod asks through Multus: runtimeConfig (the
// capability), its cni-args (args.cni, which the plugins and host-local
// honour) or CNI_ARGS MAC= and IP= (Multus's older path); with the
// capability, the MAC is the pod's.
func TestStaticAddressesOnlyWhereAllowed(t *testing.T) {
	b := newBedWith(t, nil)
	const mac = "02:00:00:00:00:09"
	calls := map[string]cnitest.Call{}
	for field, v := range map[string]map[string]any{"runtimeConfig.mac": {"mac": mac}, "runtimeConfig.ips": {"ips": []string{"10.77.0.9/24"}},
		"runtimeConfig.Mac": {"Mac": mac}} {
		calls[field] = bluePod(t).Call("netclass-nad", "ADD", "net1", cnitest.WithField(t, b.conf, "runtimeConfig", v))
	}
	for field, v := range map[string]map[string]any{"args.cni.mac": {"mac": mac}, "args.cni.ips": {"ips": []string{"10.77.0.9/24"}},
		"args.cni.MAC": {"MAC": mac}, "args.cni.IPs": {"IPs": []string{"10.77.0.9/24"}}} { // encoding/json matches names in any case
		calls[field] = bluePod(t).Call("netclass-nad", "ADD", "net1", cnitest.WithField(t, b.conf, "args", map[string]any{"cni": v}))
	}
	for field, arg := range map[string]string{"CNI_ARGS MAC": "MAC=" + mac, "CNI_ARGS IP": "IP=10.77.0.9"} {
		p := bluePod(t)
		p.Args += ";" + arg
		calls[field] = p.Call("netclass-nad", "ADD", "net1", b.conf)
	}
	for field, call := range calls {
		_, err := b.h.Exec(call)
		wantCode(t, field, err, 7, field+": network blue/vx does not allow static addresses")
	}
	withMAC := newBed(t)
	p := bluePod(t)
	p.Args += ";MAC=" + mac
	out, err := withMAC.h.Exec(p.Call("netclass-nad", "ADD", "net1", withMAC.conf))
	if err != nil {
		t.Fatalf("a static MAC where the list takes one: %v", err)
	}
	if !strings.Contains(string(out), mac) {
		t.Fatalf("result without the pod's MAC %s: %s", mac, out)
	}
}

// netclass-nad runs only a rendered file that root alone can write, in a
// directory root alone can write, as netclass-dra makes them: a NAD whose
// stateDir names a place others write (a pod's emptyDir) runs nothing.
func TestRefusesAFileOthersCanWrite(t *testing.T) {
	b := newBed(t)
	path := nadfile.Path(b.stateDir, nadfile.Ref{Namespace: "blue", Name: "vx"})
	for what, spoil := range map[string]func() error{
		"a directory others can write": func() error { return os.Chmod(filepath.Dir(path), 0o777) },
		"a file others can write":      func() error { return os.Chmod(path, 0o666) },
		"a file of another user":       func() error { return os.Chown(path, 1000, 1000) },
	} {
		if err := spoil(); err != nil {
			t.Fatal(err)
		}
		_, err := b.h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", b.conf))
		wantCode(t, what, err, 7, "stateDir: refused")
		if err := errors.Join(os.Chmod(filepath.Dir(path), 0o755), os.Chmod(path, 0o644), os.Chown(path, 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	b.h.Add(t, "netclass-nad", b.conf, bluePod(t), "net1")
}

// A Network is its namespace's only: a pod of another namespace naming
// its NAD (Multus lets a pod name a NAD of any namespace), or a call
// without the pod's namespace, is refused before anything is made.
func TestANetworkIsItsNamespaceOnly(t *testing.T) {
	b := newBed(t)
	for _, c := range []struct {
		args string
		code uint
		msg  string
	}{
		{"IgnoreUnknown=true;K8S_POD_NAMESPACE=red;K8S_POD_NAME=p", 7, "network: Network blue/vx is only for pods of namespace blue, not of red"},
		{"", 4, "K8S_POD_NAMESPACE is required"},
	} {
		p := cnitest.NewPod(t)
		p.Args = c.args
		_, err := b.h.Exec(p.Call("netclass-nad", "ADD", "net1", b.conf))
		wantCode(t, "CNI_ARGS "+c.args, err, c.code, c.msg)
		if p.NS.HasLink(t, "net1") {
			t.Errorf("CNI_ARGS %q: the refused pod has a net1", c.args)
		}
	}
}

// wantRecordedNAD: netclass-bridge's record of the pod's net1 names the NAD.
func wantRecordedNAD(t *testing.T, dir, containerID, nad string) {
	t.Helper()
	r, err := attach.Store{Dir: dir}.Get("blue_vx", containerID, "net1")
	if err != nil || r == nil {
		t.Fatalf("record of %s: %v", containerID, err)
	}
	if got := nadfile.NADOf(r.Config); got != nad {
		t.Errorf("record of %s names NAD %q, want %q (config %s)", containerID, got, nad, r.Config)
	}
}

// One sandbox gets at most nad.MaxPerSandbox interfaces through netclass-nad,
// however many times its pod names a NAD; one goes, another may come.
func TestInterfacesPerSandboxBounded(t *testing.T) {
	b := newBed(t)
	p := bluePod(t)
	for i := 1; i <= nad.MaxPerSandbox; i++ {
		if _, err := b.h.Exec(p.Call("netclass-nad", "ADD", fmt.Sprintf("net%d", i), b.conf)); err != nil {
			t.Fatalf("ADD net%d: %v", i, err)
		}
	}
	over := fmt.Sprintf("net%d", nad.MaxPerSandbox+1)
	_, err := b.h.Exec(p.Call("netclass-nad", "ADD", over, b.conf))
	wantCode(t, "one interface too many", err, 7, fmt.Sprintf("the pod has %d interfaces through netclass's NADs already", nad.MaxPerSandbox))
	if _, err := b.h.Exec(bluePod(t).Call("netclass-nad", "ADD", "net1", b.conf)); err != nil {
		t.Errorf("another pod's ADD: %v", err)
	}
	if _, err := b.h.Exec(p.Call("netclass-nad", "DEL", "net1", b.conf)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.h.Exec(p.Call("netclass-nad", "ADD", over, b.conf)); err != nil {
		t.Errorf("ADD after a DEL: %v", err)
	}
}
