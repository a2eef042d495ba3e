// Package runner runs a conf/demo scenario (netclass-demo, `make demo`) on this machine with no cluster:
// "nodes" and pods are network namespaces, the plugins are executed through
// libcni exactly as a container runtime does, and every check is made with
// real traffic. It prints what it verified and cleans up after itself, also
// when interrupted; a run also removes what an earlier, killed run left.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/netclass-dev/netclass/conf/demo"
	"github.com/netclass-dev/netclass/demo/traffic"
)

// Prefix names every namespace the demo creates.
const Prefix = "ncdemo-"

// Runner holds one run's state.
type Runner struct {
	S      *demo.Scenario
	BinDir string // netclass and upstream plugin binaries
	Out    io.Writer

	work    string // state directories, libcni cache
	cni     *libcni.CNIConfig
	nodes   map[string]*traffic.NS
	pods    map[string]*pod
	results []result
}

type pod struct {
	spec demo.Pod
	ns   *traffic.NS
	node *traffic.NS
	list *libcni.NetworkConfigList
	rt   *libcni.RuntimeConf
	addr string
}

type result struct {
	section, what, want, got string
	ok                       bool
}

// Run builds the scenario, verifies every check and tears everything down.
// It returns an error when a step failed or a check did not hold.
func (r *Runner) Run(ctx context.Context) (err error) {
	start := time.Now()
	if err := RemoveLeftovers(); err != nil {
		return err
	}
	r.work = WorkDir()
	if err := os.RemoveAll(r.work); err != nil { // what a killed run left
		return err
	}
	if err := os.MkdirAll(r.work, 0o700); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.teardown()) }()
	r.cni = libcni.NewCNIConfigWithCacheDir([]string{r.BinDir}, r.work+"/cache", nil)
	if err := r.build(ctx); err != nil {
		return err
	}
	r.printAttachments()
	if err := r.check(ctx); err != nil {
		return err
	}
	return r.report(time.Since(start))
}

// WorkDir holds a run's state directories and libcni cache.
func WorkDir() string { return filepath.Join(os.TempDir(), "netclass-demo") }

// interrupted reports a cancelled run (SIGINT, SIGTERM).
func interrupted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: cleaning up: %w", err)
	}
	return nil
}

// RemoveLeftovers deletes namespaces an interrupted run left behind.
func RemoveLeftovers() error {
	entries, err := os.ReadDir("/var/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			errs = append(errs, (&traffic.NS{Name: e.Name()}).Delete())
		}
	}
	return errors.Join(errs...)
}

// teardown runs DEL for every attachment (as a runtime would), then removes
// the namespaces and state.
func (r *Runner) teardown() error {
	var errs []error
	ctx := context.Background()
	for _, p := range r.pods {
		if p.list != nil {
			errs = append(errs, p.node.Run(func() error { return r.cni.DelNetworkList(ctx, p.list, p.rt) }))
		}
	}
	for _, p := range r.pods {
		errs = append(errs, p.ns.Delete())
	}
	for _, n := range r.nodes {
		errs = append(errs, n.Delete())
	}
	errs = append(errs, RemoveLeftovers(), os.RemoveAll(r.work))
	return errors.Join(errs...)
}

func (r *Runner) record(section, what, want, got string, ok bool) {
	r.results = append(r.results, result{section, what, want, got, ok})
}

func (r *Runner) report(took time.Duration) error {
	failed := 0
	for _, res := range r.results {
		if !res.ok {
			failed++
		}
	}
	fmt.Fprintln(r.Out)
	if failed > 0 {
		fmt.Fprintf(r.Out, "%d of %d checks FAILED (%.1fs)\n", failed, len(r.results), took.Seconds())
		return fmt.Errorf("%d checks failed", failed)
	}
	fmt.Fprintf(r.Out, "all %d checks passed (%.1fs)\n", len(r.results), took.Seconds())
	return nil
}
