package cnitest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestRemoveStale(t *testing.T) {
	tmp := t.TempDir()
	mine := filepath.Join(tmp, buildPrefix+strconv.Itoa(os.Getpid()))
	gone := filepath.Join(tmp, buildPrefix+"2147483646") // no such process
	other := filepath.Join(tmp, "unrelated-123")
	for _, d := range []string{mine, gone, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(tmp)
	for d, want := range map[string]bool{mine: true, gone: false, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists=%v, want %v", d, err == nil, want)
		}
	}
}
