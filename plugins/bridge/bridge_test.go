package bridge

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/cnitest"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/traffic"
)

func TestTwoPodsPingAndLifecycle(t *testing.T) {
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.10.1.0/24", "fd10:10:1::/64"}, nil)
	conf := n.bytes(t)
	a, b := cnitest.NewPod(t), cnitest.NewPod(t)
	ra := h.Add(t, plugin, conf, a, "net1")
	rb := h.Add(t, plugin, conf, b, "net1")

	if len(ra.Interfaces) != 3 || ra.Interfaces[0].Name != "blue0" || sandboxIf(ra).Sandbox != a.NS.Path {
		t.Fatalf("interfaces = %v", ra.Interfaces)
	}
	if got := a.NS.Link(t, "net1").Attrs().HardwareAddr.String(); got != sandboxIf(ra).Mac {
		t.Errorf("result MAC %s, link MAC %s", sandboxIf(ra).Mac, got)
	}
	for _, v6 := range []bool{false, true} {
		if err := traffic.Ping(a.NS, podIP(t, rb, v6), 5*time.Second); err != nil {
			t.Errorf("pod a -> pod b (v6=%v): %v", v6, err)
		}
	}
	if err := h.Check(t, plugin, conf, ra, a, "net1"); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	hostIf := bridgeport.HostVethName(a.ID, "net1")
	for i := range 2 {
		if err := h.Del(plugin, conf, a, "net1"); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if a.NS.HasLink(t, "net1") || h.NS.HasLink(t, hostIf) {
		t.Error("DEL left the veth behind")
	}
	if err := traffic.Ping(b.NS, podIP(t, ra, false), 300*time.Millisecond); err == nil {
		t.Error("pod a still answers after DEL")
	}
	assertReleased(t, n, podIP(t, ra, false).String())
}

// assertReleased fails when host-local still holds the address.
func assertReleased(t *testing.T, n *network, ip string) {
	t.Helper()
	dir := n.conf["ipam"].(map[string]any)["dataDir"].(string)
	if _, err := os.Stat(filepath.Join(dir, n.conf["name"].(string), ip)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("address %s is still allocated (%v)", ip, err)
	}
}

func TestDelWithoutNamespaceOrAdd(t *testing.T) {
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.10.2.0/24"}, map[string]any{
		"qos": map[string]any{"dscp": 10, "ingressRate": 8000000, "ingressBurst": 80000, "egressRate": 8000000, "egressBurst": 80000},
	})
	conf := n.bytes(t)
	p := cnitest.NewPod(t)
	res := h.Add(t, plugin, conf, p, "net1")
	hostIf := bridgeport.HostVethName(p.ID, "net1")
	if err := p.NS.Handle(t).LinkDel(p.NS.Link(t, "net1")); err != nil { // the pod's side vanishes first
		t.Fatal(err)
	}
	gone := p.Call(plugin, "DEL", "net1", conf)
	gone.NetNS = "/var/run/netns/nct-does-not-exist"
	for i := range 2 {
		if _, err := h.Exec(gone); err != nil {
			t.Fatalf("DEL #%d with a missing netns: %v", i+1, err)
		}
	}
	if h.NS.HasLink(t, hostIf) {
		t.Error("DEL left the host end behind")
	}
	assertNoHostQoS(t, h, p)
	assertReleased(t, n, podIP(t, res, false).String())
	never := cnitest.NewPod(t)
	if err := h.Del(plugin, conf, never, "net1"); err != nil {
		t.Errorf("DEL of an attachment never added: %v", err)
	}
}

func TestCheckNoticesChanges(t *testing.T) {
	qosConf := map[string]any{"qos": map[string]any{
		"egressRate": 20000000, "egressBurst": 200000, "ingressRate": 10000000, "ingressBurst": 100000, "dscp": 46,
		"egress": []any{map[string]any{"priority": 1, "dscp": 20, "classifier": map[string]any{
			"ports": []any{map[string]any{"protocol": "TCP", "port": 80}}}}},
	}}
	tests := []struct {
		name   string
		tamper func(t *testing.T, h *cnitest.Host, p *cnitest.Pod)
	}{
		{"egress qdisc removed", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", h.NS.Name, "tc", "qdisc", "del", "dev", hostIFB(p), "root")
		}},
		{"egress no longer redirected", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", h.NS.Name, "tc", "qdisc", "del", "dev", bridgeport.HostVethName(p.ID, "net1"), "ingress")
		}},
		{"egress ifb deleted", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", h.NS.Name, "link", "del", hostIFB(p))
		}},
		{"ingress qdisc changed", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", h.NS.Name, "tc", "qdisc", "replace", "dev", bridgeport.HostVethName(p.ID, "net1"),
				"root", "tbf", "rate", "1mbit", "burst", "10kb", "latency", "25ms")
		}},
		{"dscp rule removed", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", h.NS.Name, "nft", "flush", "chain", "bridge", nft.PortQoSTable, nft.PortChain(bridgeport.HostVethName(p.ID, "net1"))+"/r0")
		}},
		{"port unmapped", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", h.NS.Name, "nft", "delete", "element", "bridge", nft.PortQoSTable, "ports",
				`{ "`+bridgeport.HostVethName(p.ID, "net1")+`" }`)
		}},
		{"an older netclass's table in the pod", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", p.NS.Name, "nft", "add", "table", "inet", "netclass_net1")
		}},
		{"shared table deleted", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "netns", "exec", h.NS.Name, "nft", "delete", "table", "bridge", nft.PortQoSTable)
		}},
		{"address removed", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "addr", "flush", "dev", "net1")
		}},
		{"route removed", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "route", "del", "default")
		}},
		{"host end left the bridge", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", h.NS.Name, "link", "set", bridgeport.HostVethName(p.ID, "net1"), "nomaster")
		}},
		{"pod link deleted", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "link", "del", "net1")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cnitest.NewHost(t)
			n := newNetwork(t, "blue", "blue0", []string{"10.10.3.0/24"}, qosConf)
			n.conf["isDefaultGateway"] = true
			conf := n.bytes(t)
			p := cnitest.NewPod(t)
			res := h.Add(t, plugin, conf, p, "net1")
			if err := h.Check(t, plugin, conf, res, p, "net1"); err != nil {
				t.Fatalf("CHECK before tampering: %v", err)
			}
			tc.tamper(t, h, p)
			if err := h.Check(t, plugin, conf, res, p, "net1"); err == nil {
				t.Fatal("CHECK passed after tampering")
			}
		})
	}
}

// hostIFB is the IFB on the host shaping pod p's net1 egress.
func hostIFB(p *cnitest.Pod) string {
	return qosport.HostIFBName(bridgeport.HostVethName(p.ID, "net1"))
}

// assertNoHostQoS fails when the host keeps QoS state of pod p's net1.
func assertNoHostQoS(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
	t.Helper()
	if h.NS.HasLink(t, hostIFB(p)) {
		t.Errorf("the egress IFB of %s is left on the host", p.ID)
	}
	out := h.NS.Ruleset(t)
	if host := bridgeport.HostVethName(p.ID, "net1"); strings.Contains(out, host) {
		t.Errorf("the rules of %s are left on the host:\n%s", host, out)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := execCommand(name, args...); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// An attachment an older netclass made kept its rules in the pod, at the
// IP output path (whose drops error the sender): ADD on that interface
// (again) removes them, and the rules are on the host end only.
func TestAddRemovesAnOlderNetclassesPodRules(t *testing.T) {
	h := cnitest.NewHost(t)
	conf := newNetwork(t, "blue", "blue0", []string{"10.10.9.0/24"}, map[string]any{"qos": map[string]any{"dscp": 8}}).bytes(t)
	p := cnitest.NewPod(t)
	run(t, "ip", "netns", "exec", p.NS.Name, "nft", "add", "table", "inet", "netclass_net1")
	run(t, "ip", "netns", "exec", p.NS.Name, "nft", "add", "chain", "inet", "netclass_net1", "egress",
		"{ type filter hook postrouting priority mangle; policy accept; }")
	res := h.Add(t, plugin, conf, p, "net1")
	if out := p.NS.Ruleset(t); out != "" {
		t.Errorf("ADD left the older table in the pod: %s", out)
	}
	if err := h.Check(t, plugin, conf, res, p, "net1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
}

func TestFailedAddLeavesNothing(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, h *cnitest.Host, p *cnitest.Pod)
		want    string
		holder  func(h *cnitest.Host, p *cnitest.Pod) (*nstest.NS, string) // the link that held the name
	}{
		{"interface name taken in the pod", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", p.NS.Name, "link", "add", "net1", "type", "bridge")
		}, "create veth", func(h *cnitest.Host, p *cnitest.Pod) (*nstest.NS, string) { return p.NS, "net1" }},
		{"host veth name taken", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			run(t, "ip", "-n", h.NS.Name, "link", "add", bridgeport.HostVethName(p.ID, "net1"), "type", "bridge")
		}, "create veth", func(h *cnitest.Host, p *cnitest.Pod) (*nstest.NS, string) {
			return h.NS, bridgeport.HostVethName(p.ID, "net1")
		}},
		{"qos cannot be applied", func(t *testing.T, h *cnitest.Host, p *cnitest.Pod) {
			// The egress IFB's name is taken on the host by a link that is no IFB.
			run(t, "ip", "-n", h.NS.Name, "link", "add", hostIFB(p), "type", "bridge")
		}, "not an ifb", func(h *cnitest.Host, p *cnitest.Pod) (*nstest.NS, string) { return h.NS, hostIFB(p) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cnitest.NewHost(t)
			n := newNetwork(t, "blue", "blue0", []string{"10.10.4.0/30"}, map[string]any{"qos": map[string]any{
				"dscp": 1, "egressRate": 8000000, "egressBurst": 80000}})
			conf := n.bytes(t)
			p := cnitest.NewPod(t)
			tc.prepare(t, h, p)
			_, err := h.Exec(p.Call(plugin, "ADD", "net1", conf))
			var e *types.Error
			if !errors.As(err, &e) || !strings.Contains(e.Msg, tc.want) {
				t.Fatalf("ADD error = %v, want a CNI error containing %q", err, tc.want)
			}
			if e.Details != "" {
				t.Errorf("cleanup after the failure failed: %s", e.Details)
			}
			// /30 has exactly one usable address (.2 is the gateway .1's peer): if it
			// leaked, the next ADD on a fresh pod fails.
			assertNoRecord(t, n, p)
			if ns, name := tc.holder(h, p); !ns.HasLink(t, name) {
				t.Errorf("the failed ADD deleted %s, which held the name: it was not its own", name)
			}
			if tc.name == "qos cannot be applied" {
				if out := h.NS.Ruleset(t); strings.Contains(out, "port/") {
					t.Errorf("the failed ADD left port rules:\n%s", out)
				}
				if h.NS.HasLink(t, bridgeport.HostVethName(p.ID, "net1")) {
					t.Error("the failed ADD left the host end")
				}
			}
			q := cnitest.NewPod(t)
			h.Add(t, plugin, conf, q, "net1")
		})
	}
}

func assertNoRecord(t *testing.T, n *network, p *cnitest.Pod) {
	t.Helper()
	dir := filepath.Join(n.conf["dataDir"].(string), n.conf["name"].(string))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), p.ID) {
			t.Errorf("record %s left behind", e.Name())
		}
	}
}

func TestParallelAdds(t *testing.T) {
	h := cnitest.NewHost(t)
	conf := newNetwork(t, "blue", "blue0", []string{"10.10.5.0/24"}, map[string]any{"qos": map[string]any{"dscp": 8}}).bytes(t)
	const n = 20
	pods := make([]*cnitest.Pod, n)
	for i := range pods {
		pods[i] = cnitest.NewPod(t)
	}
	results := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = h.Exec(pods[i].Call(plugin, "ADD", "net1", conf))
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range pods {
		if errs[i] != nil {
			t.Fatalf("ADD %d: %v", i, errs[i])
		}
		r, err := current.NewResult(results[i])
		if err != nil {
			t.Fatal(err)
		}
		ip := r.(*current.Result).IPs[0].Address.IP.String()
		if seen[ip] {
			t.Fatalf("address %s handed out twice", ip)
		}
		seen[ip] = true
	}
	if err := traffic.Ping(pods[0].NS, mustAddr(t, results[n-1]), 5*time.Second); err != nil {
		t.Errorf("first pod -> last pod: %v", err)
	}
}

func mustAddr(t *testing.T, out []byte) netip.Addr {
	t.Helper()
	r, err := current.NewResult(out)
	if err != nil {
		t.Fatal(err)
	}
	return podIP(t, r.(*current.Result), false)
}

func TestGC(t *testing.T) {
	h := cnitest.NewHost(t)
	n := newNetwork(t, "blue", "blue0", []string{"10.10.6.0/24"}, map[string]any{"qos": map[string]any{
		"dscp": 8, "egressRate": 8000000, "egressBurst": 80000}})
	conf := n.bytes(t)
	keep, drop1, drop2 := cnitest.NewPod(t), cnitest.NewPod(t), cnitest.NewPod(t)
	rk := h.Add(t, plugin, conf, keep, "net1")
	r1 := h.Add(t, plugin, conf, drop1, "net1")
	r2 := h.Add(t, plugin, conf, drop2, "net2")
	if err := h.GC(t, plugin, conf, keep.Attachment("net1")); err != nil {
		t.Fatalf("GC: %v", err)
	}
	for _, d := range []struct {
		p   *cnitest.Pod
		ifn string
		r   *current.Result
	}{{drop1, "net1", r1}, {drop2, "net2", r2}} {
		if d.p.NS.HasLink(t, d.ifn) || h.NS.HasLink(t, bridgeport.HostVethName(d.p.ID, d.ifn)) {
			t.Errorf("GC left %s/%s", d.p.ID, d.ifn)
		}
		assertReleased(t, n, podIP(t, d.r, false).String())
		assertNoRecord(t, n, d.p)
		if h.NS.HasLink(t, qosport.HostIFBName(bridgeport.HostVethName(d.p.ID, d.ifn))) {
			t.Errorf("GC left the egress IFB of %s/%s", d.p.ID, d.ifn)
		}
		if out := h.NS.Ruleset(t); strings.Contains(out, bridgeport.HostVethName(d.p.ID, d.ifn)) {
			t.Errorf("GC left the rules of %s/%s: %s", d.p.ID, d.ifn, out)
		}
	}
	if err := h.Check(t, plugin, conf, rk, keep, "net1"); err != nil {
		t.Errorf("the attachment GC had to keep is broken: %v", err)
	}
}

func TestErrors(t *testing.T) {
	h := cnitest.NewHost(t)
	p := cnitest.NewPod(t)
	good := newNetwork(t, "blue", "blue0", []string{"10.10.7.0/24"}, nil).bytes(t)
	tests := []struct {
		name string
		call cnitest.Call
		code uint
		want string
	}{
		{"undecodable", p.Call(plugin, "ADD", "net1", []byte(`{"cniVersion":"1.1.0",`)), types.ErrDecodingFailure, ""},
		{"invalid field", p.Call(plugin, "ADD", "net1", cnitest.WithField(t, good, "mtu", 5)), types.ErrInvalidNetworkConfig, "mtu: must be between 68 and 65535"},
		{"several invalid fields", p.Call(plugin, "ADD", "net1", cnitest.WithField(t, cnitest.WithField(t, good, "qos", map[string]any{"dscp": 99}), "bridge", "a/b")), types.ErrInvalidNetworkConfig, "qos.dscp"},
		{"missing netns", cnitest.Call{Plugin: plugin, Command: "ADD", ContainerID: "x", NetNS: "/var/run/netns/nct-missing", IfName: "net1", Conf: good}, types.ErrInvalidNetNS, "netns"},
		{"no CNI_NETNS", cnitest.Call{Plugin: plugin, Command: "ADD", ContainerID: "x", IfName: "net1", Conf: good}, types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"unsupported version", p.Call(plugin, "ADD", "net1", cnitest.WithField(t, good, "cniVersion", "9.9.9")), types.ErrIncompatibleCNIVersion, ""},
		{"CHECK without prevResult", p.Call(plugin, "CHECK", "net1", good), types.ErrInvalidNetworkConfig, "prevResult"},
		{"STATUS with a missing IPAM plugin", cnitest.Call{Plugin: plugin, Command: "STATUS", Conf: cnitest.WithField(t, good, "ipam", map[string]any{"type": "no-such-ipam"})}, attach.ErrPluginNotAvailable, "no-such-ipam"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.Exec(tc.call)
			var e *types.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a CNI error", err)
			}
			if e.Code != tc.code || !strings.Contains(e.Msg+e.Details, tc.want) {
				t.Fatalf("error = %d %q %q, want code %d containing %q", e.Code, e.Msg, e.Details, tc.code, tc.want)
			}
		})
	}
	if _, err := h.Exec(cnitest.Call{Plugin: plugin, Command: "STATUS", Conf: good}); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	if p.NS.HasLink(t, "net1") {
		t.Error("a failed call left a link")
	}
}

func TestOlderSpecVersions(t *testing.T) {
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0"} {
		t.Run(v, func(t *testing.T) {
			h := cnitest.NewHost(t)
			n := newNetwork(t, "blue", "blue0", []string{"10.10.8.0/24"}, map[string]any{"cniVersion": v})
			p := cnitest.NewPod(t)
			out, err := h.Exec(p.Call(plugin, "ADD", "net1", n.bytes(t)))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), fmt.Sprintf(`"cniVersion": "%s"`, v)) {
				t.Fatalf("result is not in version %s: %s", v, out)
			}
			if err := h.Del(plugin, n.bytes(t), p, "net1"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
