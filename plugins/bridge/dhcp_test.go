package bridge

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

// TestDHCPIPAM attaches a pod with upstream's dhcp IPAM as the delegate:
// dnsmasq serves leases on the bridge from a server namespace, and the
// dhcp plugin's daemon runs in the test's host namespace.
func TestDHCPIPAM(t *testing.T) {
	h := cnitest.NewHost(t)
	srv := nstest.New(t)
	run(t, "ip", "-n", h.NS.Name, "link", "add", "dhcp0", "type", "bridge")
	run(t, "ip", "-n", h.NS.Name, "link", "set", "dhcp0", "up")
	nstest.Veth(t, h.NS, "srvport", "", srv, "srv0", "10.40.0.1/24")
	run(t, "ip", "-n", h.NS.Name, "link", "set", "srvport", "master", "dhcp0")
	dir := t.TempDir()
	start(t, srv, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--interface=srv0", "--bind-interfaces",
		"--port=0", "--dhcp-range=10.40.0.100,10.40.0.150,255.255.255.0,1h",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file=")
	sock := filepath.Join(dir, "dhcp.sock")
	start(t, h.NS, filepath.Join(h.Dir, "dhcp"), "daemon", "-socketpath", sock, "-pidfile", filepath.Join(dir, "dhcp.pid"))
	waitFor(t, sock)

	n := newNetwork(t, "dhcpnet", "dhcp0", nil, nil)
	n.conf["isGateway"] = false
	n.conf["ipam"] = map[string]any{"type": "dhcp", "daemonSocketPath": sock}
	p := cnitest.NewPod(t)
	res := h.Add(t, plugin, n.bytes(t), p, "net1")
	got := podIP(t, res, false)
	if got.Less(mustParse("10.40.0.100")) || mustParse("10.40.0.150").Less(got) {
		t.Errorf("leased %s, outside dnsmasq's range", got)
	}
	if err := traffic.Ping(p.NS, mustParse("10.40.0.1"), 5*time.Second); err != nil {
		t.Errorf("pod with a DHCP lease -> DHCP server: %v", err)
	}
	if err := h.Check(t, plugin, n.bytes(t), res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	if err := h.Del(plugin, n.bytes(t), p, "net1"); err != nil {
		t.Fatalf("DEL (releases the lease): %v", err)
	}
}

// start runs a long-lived helper inside ns and stops it (by its PID) at cleanup.
func start(t *testing.T, ns *nstest.NS, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	out, err := os.CreateTemp(t.TempDir(), "log-")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := ns.Run(cmd.Start); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", name, b)
		}
	})
}

// waitFor polls until path exists (a daemon's socket), with a deadline.
func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(fmt.Errorf("%s did not appear within 10s", path))
}
