//go:build !vmtest

package guest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recorder stands in for a test to see how the helpers fail it.
type recorder struct {
	testing.TB
	fatal   string
	skipped bool
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(...any)          { r.skipped = true; runtime.Goexit() }
func (r *recorder) Skipf(string, ...any) { r.skipped = true; runtime.Goexit() }
func (r *recorder) SkipNow()             { r.skipped = true; runtime.Goexit() }

// capture runs fn against a recorder on a goroutine of its own, as Fatalf ends it.
func capture(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func TestRequireFailsLoudlyWhenAFeatureIsMissing(t *testing.T) {
	t.Setenv("NETCLASS_VM", "")
	r := capture(t, func(tb testing.TB) { Require(tb, NetdevsimSRIOV, Feature(0)) })
	if r.skipped {
		t.Fatal("Require skipped the test; it must fail it")
	}
	for _, want := range []string{"lacks", "NetdevsimSRIOV", "Feature(0)", "make test-vm"} {
		if !strings.Contains(r.fatal, want) {
			t.Errorf("Require's failure %q does not mention %q", r.fatal, want)
		}
	}
}

func TestNetdevsimFailsOutsideTheVM(t *testing.T) {
	t.Setenv("NETCLASS_VM", "")
	r := capture(t, func(tb testing.TB) { Netdevsim(tb, 1) })
	if r.skipped || !strings.Contains(r.fatal, "make test-vm") {
		t.Fatalf("Netdevsim outside the VM: skipped=%v, failure %q; want a failure naming make test-vm", r.skipped, r.fatal)
	}
}
