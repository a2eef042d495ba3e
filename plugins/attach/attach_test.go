package attach

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func TestCNIArg(t *testing.T) {
	tests := []struct{ args, key, want string }{
		{"IgnoreUnknown=1;MAC=02:00:00:00:00:01", "MAC", "02:00:00:00:00:01"},
		{"MAC=a=b", "MAC", "a=b"},
		{"K8S_POD_NAME=x", "MAC", ""},
		{"", "MAC", ""},
		{";;MAC", "MAC", ""},
	}
	for _, tc := range tests {
		if got := CNIArg(tc.args, tc.key); got != tc.want {
			t.Errorf("CNIArg(%q, %q) = %q, want %q", tc.args, tc.key, got, tc.want)
		}
	}
}

func FuzzCNIArg(f *testing.F) {
	f.Add("IgnoreUnknown=1;MAC=02:00:00:00:00:01", "MAC")
	f.Fuzz(func(t *testing.T, args, key string) {
		got := CNIArg(args, key)
		if got != "" && !strings.Contains(args, key+"="+got) {
			t.Fatalf("CNIArg(%q, %q) = %q, which is not in the arguments", args, key, got)
		}
	})
}

func TestStore(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	r := &Record{Network: "blue", Plugin: "netclass-bridge", ContainerID: "c1", IfName: "net1", NetNS: "/x", HostIf: "nc1"}
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("blue", "c1", "net1")
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("Get = %+v, %v; want %+v", got, err, r)
	}
	all, err := s.List("blue")
	if err != nil || len(all) != 1 || all[0].Key() != (types.GCAttachment{ContainerID: "c1", IfName: "net1"}) {
		t.Fatalf("List = %+v, %v", all, err)
	}
	for range 2 {
		if err := s.Delete("blue", "c1", "net1"); err != nil {
			t.Fatalf("Delete (idempotent): %v", err)
		}
	}
	if got, err := s.Get("blue", "c1", "net1"); got != nil || err != nil {
		t.Fatalf("Get after Delete = %+v, %v", got, err)
	}
	for _, bad := range [][3]string{{"../x", "c", "i"}, {"n", "c/d", "i"}, {"n", "c", ".."}, {"", "c", "i"}} {
		if err := s.Put(&Record{Network: bad[0], ContainerID: bad[1], IfName: bad[2]}); err == nil {
			t.Errorf("Put(%q) accepted a key that escapes the store", bad)
		}
	}
	// A torn or foreign file is an error, not a silent skip.
	if err := os.MkdirAll(filepath.Join(s.Dir, "blue"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "blue", "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List("blue"); err == nil {
		t.Fatal("List accepted an undecodable record")
	}
}

// Records carry their format version; unversioned ones (written before the field) read
// as version 1, later versions are refused with the version named.
func TestRecordVersion(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.Put(&Record{Network: "blue", ContainerID: "c1", IfName: "net1"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Dir, "blue", "c1.net1.json"))
	if err != nil || !strings.Contains(string(data), `"version":1`) {
		t.Fatalf("written record %s (%v) has no version 1", data, err)
	}
	for _, tc := range []struct {
		file, want string // want: "" = read as version 1, else an error containing it
	}{
		{`{"network":"blue","containerID":"c2","ifname":"net1"}`, ""},
		{`{"version":1,"network":"blue","containerID":"c2","ifname":"net1"}`, ""},
		{`{"version":2,"network":"blue","containerID":"c2","ifname":"net1"}`, "format version 2"},
	} {
		if err := os.WriteFile(filepath.Join(s.Dir, "blue", "c2.net1.json"), []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get("blue", "c2", "net1")
		switch {
		case tc.want == "" && (err != nil || r == nil || r.Version != RecordVersion):
			t.Errorf("%s: %+v, %v; want version %d", tc.file, r, err, RecordVersion)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.file, err, tc.want)
		}
	}
}

func TestUndoRunsInReverseAndReports(t *testing.T) {
	var order []int
	var u Undo
	boom := errors.New("boom")
	u.Push(func() error { order = append(order, 1); return nil })
	u.Push(func() error { order = append(order, 2); return boom })
	u.Push(func() error { order = append(order, 3); return nil })
	if err := u.Run(); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want boom", err)
	}
	if !reflect.DeepEqual(order, []int{3, 2, 1}) {
		t.Fatalf("order = %v, want [3 2 1]", order)
	}
}

func TestParallelJoinsErrors(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	err := Parallel(func() error { return a }, func() error { return nil }, func() error { return b })
	if !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("Parallel = %v, want both errors", err)
	}
}

// TestCheckIfName: ADD and CHECK refuse a name the CNI library lets through
// with code 4 and never run; DEL still runs.
func TestCheckIfName(t *testing.T) {
	ran := map[string]bool{}
	record := func(verb string) func(*skel.CmdArgs) error {
		return func(*skel.CmdArgs) error { ran[verb] = true; return nil }
	}
	f := CheckIfName(skel.CNIFuncs{Add: record("add"), Check: record("check"), Del: record("del")})
	for _, bad := range []string{"net%d", "nét1", "net\x01"} {
		for verb, fn := range map[string]func(*skel.CmdArgs) error{"add": f.Add, "check": f.Check} {
			err := fn(&skel.CmdArgs{IfName: bad})
			var e *types.Error
			if !errors.As(err, &e) || e.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(e.Msg, "CNI_IFNAME") {
				t.Errorf("%s with %q: %v, want CNI error 4 naming CNI_IFNAME", verb, bad, err)
			}
		}
	}
	if ran["add"] || ran["check"] {
		t.Fatalf("a verb ran with a bad interface name: %v", ran)
	}
	if err := f.Del(&skel.CmdArgs{IfName: "net%d"}); err != nil || !ran["del"] {
		t.Errorf("DEL: %v, ran %v", err, ran)
	}
	if err := f.Add(&skel.CmdArgs{IfName: "net1"}); err != nil || !ran["add"] {
		t.Errorf("ADD of a good name: %v", err)
	}
}

// TestParseMACEveryPath: a MAC from CNI_ARGS gets the checks of every other
// path, with the path named.
func TestParseMACEveryPath(t *testing.T) {
	if _, err := ParseMAC("00:00:00:00:00:00", "CNI_ARGS MAC"); err == nil || !strings.Contains(err.Error(), "CNI_ARGS MAC: must not be the all-zero") {
		t.Errorf("zero MAC from CNI_ARGS: %v", err)
	}
	var e *types.Error
	if _, err := ParseMAC("01:00:5e:00:00:01", "mac"); !errors.As(err, &e) || e.Code != types.ErrInvalidNetworkConfig {
		t.Errorf("multicast MAC: %v, want CNI error 7", err)
	}
	if hw, err := ParseMAC("02:00:00:00:00:01", "mac"); err != nil || hw.String() != "02:00:00:00:00:01" {
		t.Errorf("good MAC: %v %v", hw, err)
	}
}

// A record keeps the pod interface's MAC from the result (not the host
// end's, nor another interface's): netclass-dra's agent keys a Multus
// attachment's host policy on it.
func TestAddressedKeepsThePodInterfacesMAC(t *testing.T) {
	sandbox := 1
	res := &current.Result{
		Interfaces: []*current.Interface{
			{Name: "br0", Mac: "02:00:00:00:00:01"},
			{Name: "veth1", Mac: "02:00:00:00:00:02"},
			{Name: "net2", Mac: "02:00:00:00:00:03", Sandbox: "/ns/a"},
			{Name: "net1", Mac: "02:00:00:00:00:04", Sandbox: "/ns/a"},
		},
		IPs: []*current.IPConfig{{Interface: &sandbox, Address: net.IPNet{IP: net.IPv4(10, 0, 0, 2), Mask: net.CIDRMask(24, 32)}}},
	}
	r := &Record{IfName: "net1", MAC: "02:00:00:00:00:ff"}
	r.Addressed(res)
	if r.MAC != "02:00:00:00:00:04" || !reflect.DeepEqual(r.Addresses, []string{"10.0.0.2/24"}) {
		t.Fatalf("record MAC %q, addresses %v", r.MAC, r.Addresses)
	}
}

// GC releases a stale attachment's addresses with an IPAM DEL of that
// attachment, and never delegates GC to the IPAM plugin: its store is
// shared with callers whose attachments this GC's valid list does not name
// (netclass-dra's claims and its generated NADs), whose addresses a
// GC-capable IPAM would release. (A spy IPAM logs the commands it gets.)
func TestGCNeverDelegatesToIPAM(t *testing.T) {
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "ipam.log")
	spy := "#!/bin/sh\necho \"$CNI_COMMAND $CNI_CONTAINERID\" >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(bin, "spy-ipam"), []byte(spy), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CNI_PATH", bin)
	s := Store{Dir: t.TempDir()}
	for _, id := range []string{"stale", "kept"} {
		if err := s.Put(&Record{Network: "blue", Plugin: "netclass-bridge", ContainerID: id, IfName: "net1", NetNS: "/x"}); err != nil {
			t.Fatal(err)
		}
	}
	var torn []string
	ipam := IPAM{Type: "spy-ipam", Conf: []byte(`{"cniVersion":"1.1.0","name":"blue","type":"netclass-bridge","ipam":{"type":"spy-ipam"}}`)}
	err := GC(context.Background(), s, "blue", []types.GCAttachment{{ContainerID: "kept", IfName: "net1"}}, ipam,
		func(r *Record) error { torn = append(torn, r.ContainerID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(log)
	if err != nil || string(got) != "DEL stale\n" || !slices.Equal(torn, []string{"stale"}) {
		t.Fatalf("IPAM got %q (%v), torn down %v; want only the stale attachment's DEL and teardown", got, err, torn)
	}
}
