package cni

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/test/cnitest"
)

func TestSummarize(t *testing.T) {
	zero, one := 0, 1
	res := &current.Result{
		CNIVersion: "1.1.0",
		Interfaces: []*current.Interface{{Name: "veth1234", Mac: "aa:aa:aa:aa:aa:aa"}, {Name: "net1", Mac: "02:00:00:00:00:09", Sandbox: "/run/netns/x"}},
		IPs: []*current.IPConfig{
			{Interface: &one, Address: net.IPNet{IP: net.ParseIP("10.10.1.5"), Mask: net.CIDRMask(24, 32)}},
			{Interface: &zero, Address: net.IPNet{IP: net.ParseIP("10.10.1.1"), Mask: net.CIDRMask(24, 32)}},
			{Interface: &one, Address: net.IPNet{IP: net.ParseIP("fd00::5"), Mask: net.CIDRMask(64, 128)}},
		},
	}
	got, err := Summarize(res, "net1")
	if err != nil {
		t.Fatal(err)
	}
	if got.MAC != "02:00:00:00:00:09" || strings.Join(got.IPs, ",") != "10.10.1.5/24,fd00::5/64" || got.InterfaceName != "net1" {
		t.Fatalf("Summarize = %+v", got)
	}
	if _, err := Summarize(&current.Result{CNIVersion: "1.1.0"}, "net1"); err == nil {
		t.Fatal("an empty result was accepted")
	}
}

func confList(t *testing.T, ipamDir, dataDir string) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"cniVersion": "1.1.0", "name": "shimtest",
		"plugins": []any{
			map[string]any{"type": "netclass-bridge", "bridge": "shimbr0", "dataDir": dataDir,
				"capabilities": map[string]bool{"mac": true, "ips": true},
				"ipam":         map[string]any{"type": "host-local", "dataDir": ipamDir, "ranges": []any{[]any{map[string]string{"subnet": "10.77.0.0/24"}}}}},
			map[string]any{"type": "netclass-qos", "dataDir": dataDir, "qos": map[string]any{"dscp": 46}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// The real plugins in a host namespace: ADD, the cached result, GC keeping
// only the valid attachment, DEL twice.
func TestRunnerWithPlugins(t *testing.T) {
	host := cnitest.NewHost(t)
	pod1, pod2 := cnitest.NewPod(t), cnitest.NewPod(t)
	ipamDir := t.TempDir()
	conf := confList(t, ipamDir, t.TempDir())
	r := New([]string{host.Dir}, t.TempDir())
	a1 := Attachment{ContainerID: pod1.ID, NetNS: pod1.NS.Path, IfName: "net1", PodNamespace: "ns", PodName: "p1", PodUID: "u1",
		MAC: "02:00:00:00:77:01", IPs: []string{"10.77.0.50/24"}}
	a2 := Attachment{ContainerID: pod2.ID, NetNS: pod2.NS.Path, IfName: "net1", PodNamespace: "ns", PodName: "p2", PodUID: "u2"}
	reserved := func(ip string) bool {
		_, err := os.Stat(filepath.Join(ipamDir, "shimtest", ip))
		return err == nil
	}
	host.Do(t, func(ctx context.Context) error {
		res, err := r.Add(ctx, conf, a1)
		if err != nil {
			t.Fatal(err)
		}
		if res.MAC != a1.MAC || len(res.IPs) != 1 || res.IPs[0] != "10.77.0.50/24" {
			t.Fatalf("ADD result %+v: want the static MAC and address", res)
		}
		res2, err := r.Add(ctx, conf, a2)
		if err != nil {
			t.Fatal(err)
		}
		cached, ok, err := r.Cached(conf, a1)
		if err != nil || !ok || cached.MAC != res.MAC {
			t.Fatalf("cached result %+v ok=%v err=%v", cached, ok, err)
		}
		if _, ok, err := r.Cached(conf, Attachment{ContainerID: "never", IfName: "net1"}); ok || err != nil {
			t.Fatalf("a cached result for an ADD that never ran: ok=%v err=%v", ok, err)
		}
		if !reserved("10.77.0.50") || !reserved(strings.Split(res2.IPs[0], "/")[0]) {
			t.Fatal("addresses not reserved after ADD")
		}
		if err := r.GC(ctx, conf, []Attachment{a1}); err != nil {
			t.Fatal(err)
		}
		if !reserved("10.77.0.50") || reserved(strings.Split(res2.IPs[0], "/")[0]) {
			t.Fatalf("after GC keeping only pod1: pod1 reserved %v, pod2 reserved %v", reserved("10.77.0.50"), reserved(strings.Split(res2.IPs[0], "/")[0]))
		}
		for range 2 {
			if err := r.Del(ctx, conf, a1); err != nil {
				t.Fatal(err)
			}
		}
		if reserved("10.77.0.50") {
			t.Fatal("address still reserved after DEL")
		}
		return nil
	})
	var links []netlink.Link
	pod1.NS.Do(t, func() error {
		var err error
		links, err = netlink.LinkList()
		return err
	})
	for _, l := range links {
		if l.Attrs().Name == "net1" {
			t.Fatal("net1 still in the pod after DEL")
		}
	}
}

// TestAddReturnsThePluginsWarnings: the warning lines a plugin writes to
// stderr during a successful ADD come back with the result (netclass-dra
// turns them into pod Events); other stderr lines do not.
func TestAddReturnsThePluginsWarnings(t *testing.T) {
	bin := t.TempDir()
	script := `#!/bin/sh
cat >/dev/null
echo "some diagnostic" >&2
echo "netclass warning: the egress of \"net1\" is shaped by tbf alone" >&2
echo '{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/run/netns/x"}],"ips":[{"address":"10.0.0.2/24","interface":0}]}'
`
	if err := os.WriteFile(filepath.Join(bin, "fakewarn"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	list := []byte(`{"cniVersion":"1.1.0","name":"w","plugins":[{"type":"fakewarn"}]}`)
	r := New([]string{bin}, t.TempDir())
	res, err := r.Add(context.Background(), list, Attachment{ContainerID: "c1", NetNS: "/run/netns/x", IfName: "net1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || res.Warnings[0] != `the egress of "net1" is shaped by tbf alone` {
		t.Errorf("warnings %q, want the plugin's one warning line", res.Warnings)
	}
}
