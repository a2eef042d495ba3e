package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netclass-dev/netclass/test/testbed"
)

func runIP(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return string(out), err
}

// Iface is what `ip` shows of an interface inside a pod.
type Iface struct {
	MAC   string
	CIDRs []string // global IPv4/IPv6 addresses in CIDR form
}

// PodIface reads an interface of a pod's main container with busybox ip.
// ok is false when the pod has no such interface.
func (e *Env) PodIface(ctx context.Context, ns, pod, ifname string) (Iface, bool, error) {
	out, stderr, err := testbed.Exec(ctx, e.Rest, ns, pod, "main", "ip", "-o", "addr", "show", "dev", ifname)
	if err != nil {
		if strings.Contains(stderr, "can't find device") || strings.Contains(stderr, "does not exist") {
			return Iface{}, false, nil
		}
		return Iface{}, false, fmt.Errorf("%w: %s", err, stderr)
	}
	var ifc Iface
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if (f[i] == "inet" || f[i] == "inet6") && !strings.HasPrefix(f[i+1], "fe80:") {
				ifc.CIDRs = append(ifc.CIDRs, f[i+1])
			}
		}
	}
	link, stderr, err := testbed.Exec(ctx, e.Rest, ns, pod, "main", "cat", "/sys/class/net/"+ifname+"/address")
	if err != nil {
		return Iface{}, false, fmt.Errorf("%w: %s", err, stderr)
	}
	ifc.MAC = strings.TrimSpace(link)
	return ifc, true, nil
}

// MustIface is PodIface failing the test when the interface is missing.
func (e *Env) MustIface(t testing.TB, ns, pod, ifname string) Iface {
	t.Helper()
	ifc, ok, err := e.PodIface(testbed.Context(t, time.Minute), ns, pod, ifname)
	if err != nil || !ok {
		t.Fatalf("interface %s of pod %s/%s: present=%v err=%v", ifname, ns, pod, ok, err)
	}
	return ifc
}

// Ping sends three pings from the pod to addr over ifname and fails the test
// unless they are answered.
func (e *Env) Ping(t testing.TB, ns, pod, ifname, addr string) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	out, stderr, err := testbed.Exec(ctx, e.Rest, ns, pod, "main", "ping", "-c", "3", "-W", "2", "-I", ifname, addr)
	if err != nil {
		t.Fatalf("ping %s from %s/%s over %s: %v\n%s%s", addr, ns, pod, ifname, err, out, stderr)
	}
}
