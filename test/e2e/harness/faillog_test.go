package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed test's output carries the daemon's errors and warnings and last
// lines of its own time only.
func TestSince(t *testing.T) {
	d := &DRA{LogPath: filepath.Join(t.TempDir(), "dra.log")}
	before := "E1127 10:00:00 earlier error\nI1127 10:00:00 earlier\n"
	var during strings.Builder
	for i := range 100 {
		fmt.Fprintf(&during, "I1127 10:00:01 line %d\n", i)
		if i%10 == 0 {
			fmt.Fprintf(&during, "W1127 10:00:01 warning %d\n", i)
		}
	}
	during.WriteString("E1127 10:00:02 the failure\n")
	if err := os.WriteFile(d.LogPath, []byte(before+during.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := d.since(int64(len(before)))
	for _, want := range []string{"errors and warnings (11, the last 11)", "W1127 10:00:01 warning 0\n", "E1127 10:00:02 the failure", "line 99", "line 64\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:%s", want, got)
		}
	}
	for _, not := range []string{"earlier", "line 63\n"} {
		if strings.Contains(got, not) {
			t.Errorf("%q in:%s", not, got)
		}
	}
}
