package covered

import (
	"os"
	"testing"
)

func TestCalledInVM(t *testing.T) {
	if os.Getenv("NETCLASS_VM") != "1" {
		t.Fatal("not running inside the VM harness")
	}
	if Called() != 1 {
		t.Fatal("Called() != 1")
	}
}
