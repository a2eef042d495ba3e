package traffic

import "github.com/netclass-dev/netclass/test/vm/guest"

// vmRateFactor scales the rates tests configure when they run in the VM
// suite: the guest's CPU is emulated, and on a loaded 2-core host it cannot
// always push 20 Mbit/s through a veth, a tbf and an nftables table, so a
// shaper of 20 Mbit/s would measure the emulator instead of the shaper.
const vmRateFactor = 0.4

// Rate returns the rate (bits/s) a test should configure for a shaper or
// meter it measures: hostBps on real hardware, less in the emulated guest.
// The 20% tolerance still proves the shaper, only at a rate the guest sustains.
func Rate(hostBps int64) int64 {
	if guest.InVM() {
		return int64(float64(hostBps) * vmRateFactor)
	}
	return hostBps
}
