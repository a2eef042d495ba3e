package traffic

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/netclass-dev/netclass/test/nstest"
)

// IPerf3 is one iperf3 run: a client in one namespace streaming to a
// one-off server in another, as an application would (the point is what a
// real sender's socket sees, not only what arrives).
type IPerf3 struct {
	Client, Server *nstest.NS
	Addr           netip.Addr // the server's address
	Port           uint16     // control connection (TCP) and data port
	// UDPBps > 0 sends UDP datagrams of 1200 bytes at that rate (bits/s);
	// 0 sends one TCP stream as fast as it goes.
	UDPBps   float64
	Duration time.Duration // measured time, after Omit
	Omit     time.Duration // warm-up left out of the figures (a meter's initial bucket, slow start)
}

// IPerf3Result is what the iperf3 client reported at the end.
type IPerf3Result struct {
	ReceivedBps float64 // the rate the server received, over Duration
	SentBps     float64
	Retransmits int
	// Error is iperf3's own error, e.g. "unable to write to stream socket:
	// Operation not permitted" when a write failed; "" when the run
	// completed.
	Error string
}

// Run starts the server, waits until it listens, runs the client and
// returns its report. An error means the harness itself failed (iperf3
// missing, no server); a run iperf3 aborted is a result with Error set.
func (r IPerf3) Run() (IPerf3Result, error) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		return IPerf3Result{}, fmt.Errorf("iperf3 is not installed (scripts/deps.sh installs it): %w", err)
	}
	port := strconv.Itoa(int(r.Port))
	srv := inNS(r.Server, "iperf3", "-s", "-1", "-p", port)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return IPerf3Result{}, fmt.Errorf("start iperf3 server in %s: %w", r.Server.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	defer func() {
		select {
		case <-done:
		case <-time.After(5 * time.Second): // the client failed before the server's one test ended
			srv.Process.Kill()
			<-done
		}
	}()
	if err := r.Server.Run(func() error { return waitListening(r.Port, 5*time.Second, done) }); err != nil {
		return IPerf3Result{}, fmt.Errorf("iperf3 server in %s: %w\n%s", r.Server.Name, err, srvOut.String())
	}
	return r.client()
}

func (r IPerf3) client() (IPerf3Result, error) {
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
	args := []string{"-c", r.Addr.String(), "-p", strconv.Itoa(int(r.Port)),
		"-t", secs(r.Duration), "-O", secs(r.Omit), "-J"}
	if r.UDPBps > 0 {
		args = append(args, "-u", "-l", "1200", "-b", strconv.FormatFloat(r.UDPBps, 'f', 0, 64))
	}
	out, runErr := inNS(r.Client, "iperf3", args...).Output()
	var rep iperfReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return IPerf3Result{}, fmt.Errorf("iperf3 client in %s: %v; output %q", r.Client.Name, errors.Join(runErr, err), out)
	}
	return IPerf3Result{
		ReceivedBps: rep.End.SumReceived.BitsPerSecond,
		SentBps:     rep.End.SumSent.BitsPerSecond,
		Retransmits: rep.End.SumSent.Retransmits,
		Error:       rep.Error,
	}, nil
}

// inNS is a command run inside the namespace n, by its path (a pod's
// namespace on another bed node has no name here, only a path through the
// root of a process there).
func inNS(n *nstest.NS, name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + n.Path, name}, args...)...)
}

// iperfReport is the part of `iperf3 -J` read here.
type iperfReport struct {
	Error string `json:"error"`
	End   struct {
		SumSent struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
}

// waitListening polls the calling thread's namespace until a TCP socket
// listens on port, the server exits, or timeout passes.
func waitListening(port uint16, timeout time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := listening(port)
		if err != nil || ok {
			return err
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before listening: %v", err)
		case <-time.After(10 * time.Millisecond): // polling a condition with a deadline
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on port %d after %s", port, timeout)
		}
	}
}

// listening reads /proc/thread-self/net/tcp{,6}: the namespace of the
// calling thread, not of the process.
func listening(port uint16) (bool, error) {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			return false, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" { // TCP_LISTEN
				fh.Close()
				return true, nil
			}
		}
		fh.Close()
	}
	return false, nil
}
