package examples

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/sysfs/sysfstest"
	"github.com/netclass-dev/netclass/plugins/sriov"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// stockKernel lists the examples that need a kernel feature this machine's
// kernel may lack; TestCnitoolStockKernel runs them in the VM suite.
func stockKernel() map[string]guest.Feature {
	return map[string]guest.Feature{"vlan.conflist": guest.VLAN}
}

// TestCnitool runs every example the way the README does (cnitool add,
// check, status, gc, del), in a host namespace that has the example's
// master device, with state directories moved into the test's. The ones
// in stockKernel() run in TestCnitoolStockKernel instead.
func TestCnitool(t *testing.T) {
	for _, f := range conflists(t) {
		if _, vm := stockKernel()[f]; vm {
			continue
		}
		t.Run(f, func(t *testing.T) { runExample(t, f) })
	}
}

func runExample(t *testing.T, f string) {
	h := cnitest.NewHost(t)
	peer := nstest.New(t)
	nstest.Veth(t, h.NS, "eth1", "192.168.100.11/24", peer, "eth1", "192.168.100.12/24")
	dir, name := relocate(t, f)
	env := append(os.Environ(), "NETCONFPATH="+dir, "CNI_PATH="+h.Dir, "CNI_IFNAME=net1")
	if list(t, f)[0] == "netclass-sriov" {
		env = append(env, sriovStandIn(t, h, peer))
	}
	pod := nstest.New(t)
	cnitool := func(args ...string) string {
		t.Helper()
		var out []byte
		err := h.NS.Run(func() error {
			cmd := exec.Command(filepath.Join(h.Dir, "cnitool"), args...)
			cmd.Env = env
			var err error
			out, err = cmd.CombinedOutput()
			return err
		})
		if err != nil {
			t.Fatalf("cnitool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	res := cnitool("add", name, pod.Path)
	if !strings.Contains(res, `"sandbox": "`+pod.Path+`"`) {
		t.Fatalf("add result has no interface in the pod:\n%s", res)
	}
	if !pod.HasLink(t, "net1") {
		t.Fatal("no net1 in the pod after cnitool add")
	}
	cnitool("check", name, pod.Path)
	cnitool("status", name, pod.Path)
	cnitool("del", name, pod.Path)
	if pod.HasLink(t, "net1") {
		t.Fatal("net1 is still in the pod after cnitool del")
	}
	// cnitool gc keeps nothing: netclass's state of the attachment goes.
	cnitool("add", name, pod.Path)
	cnitool("gc", name, pod.Path)
	if out := pod.Ruleset(t); out != "" {
		t.Errorf("cnitool gc left netclass rules in the pod: %s", out)
	}
	if ownsInterface(list(t, f)) && pod.HasLink(t, "net1") {
		t.Error("cnitool gc left the netclass interface in the pod")
	}
	cnitool("del", name, pod.Path)
}

// sriovStandIn makes the host's eth1 an SR-IOV PF with one VF, for
// netclass-sriov: a fake sysfs tree (returned as the environment setting the
// plugin reads it from) lists eth1 as the PF and a veth as its VF's netdev.
func sriovStandIn(t *testing.T, h *cnitest.Host, peer *nstest.NS) string {
	t.Helper()
	tree := sysfstest.New(t)
	tree.AddPF("eth1", "0000:03:00.0", 8)
	nstest.Veth(t, h.NS, "eth1v0", "", peer, "eth1v0", "")
	tree.AddVF("0000:03:00.0", 0, "0000:03:10.0", "iavf", "eth1v0")
	return sriov.EnvSysfsRoot + "=" + tree.Root
}

// pfSettings are the netclass-sriov options set through the PF, which no
// stand-in PF can take (plugins/sriov's VM tests prove them on a netdevsim
// PF): relocate drops them.
var pfSettings = []string{"vlan", "vlanQoS", "vlanProto", "mac", "spoofchk", "trust", "linkState", "minTxRate", "maxTxRate", "offloadEgressRate"}

// relocate copies an example into a temporary NETCONFPATH with every state
// directory (netclass's and host-local's) inside the test's temp dirs, and
// without the PF settings of netclass-sriov.
func relocate(t *testing.T, file string) (dir, name string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list["plugins"].([]any) {
		pm := p.(map[string]any)
		if strings.HasPrefix(fmt.Sprint(pm["type"]), "netclass-") {
			pm["dataDir"] = t.TempDir()
		}
		if pm["type"] == "netclass-sriov" {
			for _, k := range pfSettings {
				delete(pm, k)
			}
		}
		if ipam, ok := pm["ipam"].(map[string]any); ok && ipam["type"] == "host-local" {
			ipam["dataDir"] = t.TempDir()
		}
	}
	dir = t.TempDir()
	out, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, list["name"].(string)
}

// list reads an example's plugin types.
func list(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range l.Plugins {
		types = append(types, p.Type)
	}
	return types
}

// ownsInterface reports whether a netclass main plugin creates the interface.
func ownsInterface(types []string) bool {
	return len(types) > 0 && strings.HasPrefix(types[0], "netclass-") && types[0] != "netclass-qos"
}
