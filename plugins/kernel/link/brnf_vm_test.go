//go:build vmtest

package link_test

import (
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/test/nstest"
)

// On a distribution's kernel br_netfilter is a module: the kernel loads it
// when asked through an xtables physdev match, without modprobe (which a
// container may lack). The VM boots with it not loaded; this package's
// binary is the only one run in its boot.
func TestKernelLoadsBridgeNetfilterOnRequest(t *testing.T) {
	if link.BridgeNetfilterLoaded() {
		t.Fatal("br_netfilter is loaded before the request: the test proves nothing")
	}
	n := nstest.New(t)
	n.Do(t, func() error {
		c, err := nft.OpenCurrent()
		if err != nil {
			return err
		}
		return nft.RequestBridgeNetfilter(c)
	})
	if !link.BridgeNetfilterLoaded() {
		t.Fatal("br_netfilter is not loaded after the request")
	}
}
