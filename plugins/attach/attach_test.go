package attach

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
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
	if err := os.WriteFile(filepath.Join(s.Dir, "blue", "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List("blue"); err == nil {
		t.Fatal("List accepted an undecodable record")
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
