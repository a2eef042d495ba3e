package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/testbed"
)

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

// Attached checks one pod's claim: its netclass.dev status entry is Ready
// and its networkData names ifname and is what `ip` shows inside the pod.
func (e *Env) Attached(t testing.TB, ns, pod, podClaim, ifname string) resourceapi.AllocatedDeviceStatus {
	t.Helper()
	claim := e.ClaimOfPod(t, ns, pod, podClaim)
	_, entry := e.WaitClaimStatus(t, ns, claim.Name, func(d resourceapi.AllocatedDeviceStatus) bool {
		c := ReadyCondition(d)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	nd := entry.NetworkData
	if nd == nil || nd.InterfaceName != ifname {
		e.Failf(t, "claim %s/%s: networkData %+v, want interface %s", ns, claim.Name, nd, ifname)
	}
	ifc := e.MustIface(t, ns, pod, ifname)
	if nd.HardwareAddress != ifc.MAC || !slices.Equal(nd.IPs, ifc.CIDRs) {
		t.Fatalf("claim %s/%s says %s has %s %v; inside pod %s it has %s %v",
			ns, claim.Name, ifname, nd.HardwareAddress, nd.IPs, pod, ifc.MAC, ifc.CIDRs)
	}
	return entry
}

// Addr is the first address of a status entry's networkData, without its prefix length.
func Addr(t testing.TB, d resourceapi.AllocatedDeviceStatus) string {
	t.Helper()
	if d.NetworkData == nil || len(d.NetworkData.IPs) == 0 {
		t.Fatalf("no address in %+v", d)
	}
	ip, _, _ := strings.Cut(d.NetworkData.IPs[0], "/")
	return ip
}

// Failf fails the test, with the end of the host-run daemon's log when
// there is one.
func (e *Env) Failf(t testing.TB, format string, args ...any) {
	t.Helper()
	if e.DRA != nil {
		e.DRA.Failf(t, format, args...)
	}
	t.Fatalf(format, args...)
}
