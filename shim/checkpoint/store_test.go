package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/attachment"
)

func record(uid, pod string) *Claim {
	return &Claim{
		UID: types.UID(uid), Namespace: "ns", Name: "claim-" + uid,
		Pods: []Pod{{UID: types.UID(pod), Namespace: "ns", Name: "pod-" + pod}},
		Devices: []Device{{
			Request: "net", Pool: "node1", Device: "blue-1234abcd",
			Network:  attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"},
			ConfList: json.RawMessage(`{"cniVersion":"1.1.0","name":"blue","plugins":[{"type":"netclass-bridge"}]}`),
		}},
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	s, problems := Open(dir)
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	if err := s.Put(record("c1", "p1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(record("c2", "p1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(record("c3", "p2")); err != nil {
		t.Fatal(err)
	}
	if got := s.ForPod("p1"); len(got) != 2 || got[0].Name != "claim-c1" || got[1].Name != "claim-c2" {
		t.Fatalf("ForPod(p1) = %v", got)
	}
	err := s.Update("c1", func(c *Claim) error {
		c.Devices[0].SetAttachment(Attachment{PodUID: "p1", SandboxID: "sb1", NetNS: "/run/netns/x", IfName: "net1", State: Adding})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A copy handed out is private.
	c, _ := s.Get("c1")
	c.Devices[0].Attachments[0].IfName = "changed"
	if c2, _ := s.Get("c1"); c2.Devices[0].Attachments[0].IfName != "net1" {
		t.Fatal("Get returned shared state")
	}
	// An invalid update is refused and changes nothing.
	err = s.Update("c1", func(c *Claim) error { c.Devices[0].Attachments[0].State = "Bogus"; return nil })
	if err == nil {
		t.Fatal("invalid state written")
	}
	if err := s.Update("missing", func(*Claim) error { return nil }); err == nil {
		t.Fatal("update of a missing record succeeded")
	}
	if got := s.Prepared("ns", "claim-c2"); !slices.Equal(got, []types.UID{"c2"}) {
		t.Errorf("Prepared(ns, claim-c2) = %v", got)
	}
	again := record("c2b", "p1") // created again under c2's name, c2's record still here
	again.Name = "claim-c2"
	if err := s.Put(again); err != nil {
		t.Fatal(err)
	}
	if err := s.Update("c2", func(*Claim) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := s.Prepared("ns", "claim-c2"); !slices.Equal(got, []types.UID{"c2", "c2b"}) {
		t.Errorf("Prepared(ns, claim-c2) with two records = %v", got)
	}
	if err := s.Delete("c2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("c2"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if got := s.Prepared("ns", "claim-c2"); !slices.Equal(got, []types.UID{"c2b"}) {
		t.Errorf("after c2 went Prepared(ns, claim-c2) = %v, want the new claim's record only", got)
	}
	if err := s.Delete("c2b"); err != nil {
		t.Fatal(err)
	}

	// Everything survives a reopen; leftovers are cleaned, corrupt records set aside.
	os.WriteFile(filepath.Join(dir, "c9.json.123.tmp"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, "c8.json"), []byte(`{"version":1,"uid":"c8"`), 0o600)
	raw, _ := Encode(record("c7", "p7"))
	os.WriteFile(filepath.Join(dir, "wrong-name.json"), raw, 0o600)
	s2, problems := Open(dir)
	if len(problems) != 2 {
		t.Fatalf("reopen problems = %v, want the torn c8 and the misnamed record", problems)
	}
	if got := s2.List(); len(got) != 2 || got[0].Name != "claim-c1" || got[1].Name != "claim-c3" {
		t.Fatalf("after reopen: %v", got)
	}
	if c, _ := s2.Get("c1"); c.Devices[0].Attachments[0].State != Adding {
		t.Fatalf("attachment lost across reopen: %+v", c.Devices[0])
	}
	for _, name := range []string{"c8.json.corrupt", "wrong-name.json.corrupt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s not set aside: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "c9.json.123.tmp")); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
	// Records set aside stay reported at every start (the daemon keeps GC off).
	if _, problems := Open(dir); len(problems) != 2 || !strings.Contains(errors.Join(problems...).Error(), "set aside earlier") {
		t.Fatalf("second reopen problems = %v, want both set-aside records again", problems)
	}
	if len(s2.ForPod("p2")) != 1 || len(s2.ForPod("p1")) != 1 {
		t.Error("pod index not rebuilt")
	}
	if got := s2.Prepared("ns", "claim-c3"); !slices.Equal(got, []types.UID{"c3"}) {
		t.Errorf("name index not rebuilt: Prepared(ns, claim-c3) = %v", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(record("c1", "p1"))
	for _, tc := range []struct{ name, raw, want string }{
		{"empty", ``, "decode"},
		{"unknown field", strings.Replace(string(good), `"uid"`, `"bogus":1,"uid"`, 1), "unknown field"},
		{"unknown old version", strings.Replace(string(good), `"version":3`, `"version":0`, 1), "version 0, this netclass-dra reads versions 1 to 3"},
		{"newer version", strings.Replace(string(good), `"version":3`, `"version":4`, 1), "version 4"},
		{"no uid", strings.Replace(string(good), `"uid":"c1"`, `"uid":""`, 1), "uid, namespace and name"},
		{"bad conflist", strings.Replace(string(good), `"confList":{`, `"confList":"x","x":{`, 1), ""},
		{"trailing", string(good) + "{}", "trailing"},
		{"a stray bracket after it", string(good) + "}", "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDecodeMigratesVersion1: a record written by the previous format is
// read, upgraded, and written back in the current one.
func TestDecodeMigratesVersion1(t *testing.T) {
	v1 := `{"version":1,"uid":"u1","namespace":"n","name":"c","pods":[{"uid":"p1","namespace":"n","name":"pod","order":0}],` +
		`"devices":[{"request":"r","pool":"node","device":"d","network":{"class":"c","group":"g","version":"v","kind":"PodNetwork","name":"blue"},` +
		`"confList":{"cniVersion":"1.1.0","name":"blue","plugins":[{"type":"netclass-bridge"}]},` +
		`"attachments":[{"podUID":"p1","sandboxID":"s1","netns":"/run/netns/x","ifName":"net1","state":"Attached","result":{"interfaceName":"net1","ips":["10.0.0.1/24"]}}]}],` +
		`"preparedAt":"2026-01-01T00:00:00Z"}`
	c, err := Decode([]byte(v1))
	if err != nil {
		t.Fatalf("a version 1 record is not read: %v", err)
	}
	if c.Version != Version || len(c.Devices) != 1 || len(c.Devices[0].Attachments) != 1 || c.Devices[0].Attachments[0].AttachedAt != nil {
		t.Fatalf("migrated record %+v", c)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "u1.json"), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	s, problems := Open(dir)
	if len(problems) > 0 {
		t.Fatalf("opening a version 1 record: %v", problems)
	}
	if err := s.Update("u1", func(*Claim) error { return nil }); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "u1.json"))
	if !strings.Contains(string(raw), `"version":3`) {
		t.Fatalf("the record was not written back in version %d: %s", Version, raw)
	}
}

// The writer child: Put records in a loop until killed.
const crashEnv = "NETCLASS_CHECKPOINT_CRASH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		s, problems := Open(dir)
		if len(problems) != 0 {
			fmt.Fprintln(os.Stderr, problems)
			os.Exit(2)
		}
		for i := 0; ; i++ {
			c := record("c"+strconv.Itoa(i%7), "p")
			c.Devices[0].IPs = []string{fmt.Sprintf("10.0.%d.%d/16", i/250%250, i%250+1)}
			if err := s.Put(c); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if i%5 == 4 {
				s.Delete(c.UID)
			}
		}
	}
	os.Exit(m.Run())
}

// SIGKILL a process in the middle of writing records, many times: every
// record left must decode, and nothing must be set aside as corrupt.
func TestCrashDuringWrites(t *testing.T) {
	dir := t.TempDir()
	for round := range 10 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForRecords(t, dir, cmd)
		time.Sleep(time.Duration(round*7) * time.Millisecond) // vary where the kill lands
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: writer ended with %v before the kill: %s", round, err, stderr.String())
		}
		s, problems := Open(dir)
		if len(problems) != 0 {
			t.Fatalf("round %d: after SIGKILL: %v", round, problems)
		}
		for _, c := range s.List() {
			if len(c.Devices) != 1 || len(c.Devices[0].IPs) != 1 {
				t.Fatalf("round %d: incomplete record %+v", round, c)
			}
		}
	}
}

// waitForRecords polls until the writer has written at least one record.
func waitForRecords(t *testing.T, dir string, cmd *exec.Cmd) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(m) > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	t.Fatal("the writer wrote nothing in 20 s")
}
