package runner

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netclass-dev/netclass/conf/demo"
	"github.com/netclass-dev/netclass/demo/traffic"
)

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func (p *pod) ip() netip.Addr {
	pf, err := netip.ParsePrefix(p.addr)
	if err != nil {
		return netip.Addr{}
	}
	return pf.Addr()
}

func (r *Runner) printAttachments() {
	fmt.Fprintf(r.Out, "netclass demo: %d nodes on one underlay, %d networks, %d pods\n\n", len(r.S.Nodes), len(r.S.Networks), len(r.S.Pods))
	w := tabwriter.NewWriter(r.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tNODE\tNETWORK\tADDRESS\tQOS (runtimeConfig.qos)")
	for _, spec := range r.S.Pods {
		p := r.pods[spec.Name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", spec.Name, spec.Node, spec.Network+" ("+r.describe(spec.Network)+")", p.addr, qosSummary(spec))
	}
	w.Flush()
}

func (r *Runner) describe(network string) string {
	for _, n := range r.S.Networks {
		if n.Name == network {
			return n.Description
		}
	}
	return ""
}

func qosSummary(p demo.Pod) string { return p.GetQoS() }

// check runs every check of the scenario and prints one table per kind;
// it stops early only when interrupted.
func (r *Runner) check(ctx context.Context) error {
	defer r.printResults()
	for _, c := range r.S.Checks.Reach {
		if err := interrupted(ctx); err != nil {
			return err
		}
		from, to := r.pods[c.From], r.pods[c.To]
		timeout := 3 * time.Second
		if !c.Expect {
			timeout = time.Second
		}
		err := traffic.Ping(from.ns, to.ip(), timeout)
		r.record("reachability (ICMP)", fmt.Sprintf("%s -> %s (%s)", c.From, c.To, to.ip()), word(c.Expect, "reaches", "must not reach"),
			word(err == nil, "reached", "no reply"), (err == nil) == c.Expect)
	}
	for _, c := range r.S.Checks.DSCP {
		if err := interrupted(ctx); err != nil {
			return err
		}
		got, err := r.dscp(c.From, c.To, c.Protocol, c.Port)
		gotS := fmt.Sprint(got)
		if err != nil {
			gotS = err.Error()
		}
		r.record("DSCP seen by the receiver", fmt.Sprintf("%s -> %s %s/%d", c.From, c.To, c.Protocol, c.Port), fmt.Sprint(c.Expect), gotS, err == nil && got == c.Expect)
	}
	for _, c := range r.S.Checks.Rate {
		if err := interrupted(ctx); err != nil {
			return err
		}
		bps, err := r.sampledRate(c.From, c.To, c.Protocol, c.Port, c.OfferBps, c.ExpectBps)
		got := fmt.Sprintf("%.2f Mbit/s", bps/1e6)
		if err != nil {
			got = err.Error()
		}
		ok := err == nil && math.Abs(bps-c.ExpectBps) <= 0.2*c.ExpectBps
		r.record("rates (received, within 20%)", fmt.Sprintf("%s: %s -> %s %s/%d", c.What, c.From, c.To, c.Protocol, c.Port),
			fmt.Sprintf("%.2f Mbit/s", c.ExpectBps/1e6), got, ok)
	}
	return nil
}

func word(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func (r *Runner) dscp(fromName, toName, proto string, port uint16) (uint8, error) {
	from, to := r.pods[fromName], r.pods[toName]
	sniff, err := traffic.Sniff(to.ns, "net1")
	if err != nil {
		return 0, err
	}
	defer sniff.Close()
	dst := netip.AddrPortFrom(to.ip(), port).String()
	network := strings.ToLower(proto)
	from.ns.Run(func() error {
		c, err := net.DialTimeout(network, dst, 300*time.Millisecond)
		if err == nil {
			c.Write([]byte("netclass"))
			c.Close()
		}
		return nil // a refused TCP connection still sent its SYN
	})
	got := sniff.WaitFor(func(p traffic.Packet) bool { return p.Dst == to.ip() && p.DstPort == port }, 1, 3*time.Second)
	if len(got) == 0 {
		return 0, fmt.Errorf("no packet seen")
	}
	return got[0].DSCP, nil
}

// sampledRate is rate, measured a second time when the first sample is
// under 80% of the shaped rate, and the higher of the two kept: a short
// transfer on a machine whose CPUs are busy (the test suites run beside
// each other) can fall under the bound without the shaping being wrong
// (seen once: 15.55 of 20 Mbit/s). A rate over the bound is never sampled
// again: that is the shaping failing.
func (r *Runner) sampledRate(fromName, toName, proto string, port uint16, offer, expect float64) (float64, error) {
	bps, err := r.rate(fromName, toName, proto, port, offer)
	if err != nil || bps >= 0.8*expect {
		return bps, err
	}
	again, err := r.rate(fromName, toName, proto, port, offer)
	return max(bps, again), err
}

func (r *Runner) rate(fromName, toName, proto string, port uint16, offer float64) (float64, error) {
	from, to := r.pods[fromName], r.pods[toName]
	if strings.EqualFold(proto, "TCP") {
		return traffic.TCPRate(from.ns, to.ns, to.ip(), port, 2*time.Second)
	}
	res, err := traffic.UDPRate(from.ns, to.ns, to.ip(), port, 1200, offer, 3*time.Second, time.Second)
	return res.SteadyBps, err
}

func (r *Runner) printResults() {
	section := ""
	w := tabwriter.NewWriter(r.Out, 0, 0, 2, ' ', 0)
	for _, res := range r.results {
		if res.section != section {
			section = res.section
			w.Flush()
			fmt.Fprintf(r.Out, "\n%s\n", strings.ToUpper(section[:1])+section[1:])
			fmt.Fprintln(w, "CHECK\tEXPECTED\tSEEN\tRESULT")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", res.what, res.want, res.got, word(res.ok, "ok", "FAIL"))
	}
	w.Flush()
}
