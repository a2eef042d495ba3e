// Package podpolicy applies NetworkPolicy plans (conf/netpol) to pod
// interfaces where they cannot be escaped from inside the pod:
//
//   - an interface whose host end is a port of a host bridge has its policy
//     on the host side of the port (plugins/kernel/nft.SyncHostPolicies),
//     with the port's guard (its MAC and addresses, plugins/portguard), and
//     the port is opened once both are in place;
//   - any other interface (a VF, macvlan, a VLAN made in the pod) has a table
//     in its pod's namespace (nft.SyncPolicy), which a pod with
//     CAP_NET_ADMIN can remove, and which a pod with CAP_NET_RAW escapes on
//     egress with packet sockets (README, "NetworkPolicy on netclass
//     networks").
//
// Policies are brought to their plans in place.
package podpolicy

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netpol"
)

// Interface is a pod interface whose policy Sync brings to Plan.
type Interface struct {
	PodNS, IfName string
	// MAC and IPs are the attachment's, as its ADD reported them: on its
	// bridge the pod is known by them (its guard, which the pod cannot
	// change, makes them its own). A nil MAC is read from the pod.
	MAC  net.HardwareAddr
	IPs  []netip.Addr
	Plan *netpol.Plan
	// Prev, when set, is the plan the interface holds (its last sync's):
	// what it holds is then not read back (nor is its pod searched for an
	// older netclass's table, which its first sync removed).
	Prev *netpol.Plan
	// Port, when set with Prev, is where the last sync put the policy
	// (its Result's Port): the port is found there while the host still
	// has it, without looking from the pod.
	Port *Port
}

// Port is the host end of a bridge port holding an interface's policy.
type Port struct {
	HostIf                 string
	HostIndex, BridgeIndex int
}

// NewInterface describes an interface as a CNI result records it: its MAC
// ("" or unreadable: read from the pod) and addresses in CIDR form.
func NewInterface(podNS, ifname, mac string, cidrs []string, plan *netpol.Plan) Interface {
	f := Interface{PodNS: podNS, IfName: ifname, Plan: plan}
	if m, err := net.ParseMAC(mac); err == nil {
		f.MAC = m
	}
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil {
			f.IPs = append(f.IPs, p.Addr())
		}
	}
	return f
}

// Result is what a sync did to one interface.
type Result struct {
	Changed bool
	// At is when the change took effect (zero: unknown, or no change).
	At  time.Time
	Err error
	// Port is where the policy is, when on the host end of a bridge port
	// (nil: in the pod, or failed).
	Port *Port
}

// workers bounds the pods synced at once: a pod's sync mostly waits on
// the kernel (its table's dump, its transaction's commit), so several in
// parallel finish an edit selecting many pods sooner (make bench, 100 pods:
// 4 workers took p50 from 0.76 s to 0.32 s, 8 to 0.26 s).
const workers = 8

// Sync brings each interface's policy to its plan; results are in the
// order of ifs. The ports of host bridges are synced together, in few
// transactions; the other interfaces one by one in their pods. The host is
// the calling thread's network namespace.
func Sync(ifs []Interface) []Result {
	out := make([]Result, len(ifs))
	where := make([]place, len(ifs))
	bridges := map[int]netlink.Link{}
	for i := range ifs { // in the calling thread: the host ends are in its namespace
		where[i], out[i].Err = locate(ifs[i], bridges)
	}
	var ports []int
	var inPod []int
	for i := range ifs {
		switch {
		case out[i].Err != nil:
		case where[i].hostIf != "":
			ports = append(ports, i)
		default:
			inPod = append(inPod, i)
		}
	}
	parallel(len(inPod), func(j int) {
		i := inPod[j]
		out[i].Changed, out[i].Err = syncInPod(ifs[i])
	})
	if len(ports) > 0 {
		syncPorts(ifs, where, ports, out)
	}
	return out
}

// parallel runs fn(0..n-1) on at most workers goroutines.
func parallel(n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
