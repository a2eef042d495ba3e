package sriov

import (
	"os"
	"testing"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/sysfs"
)

// envFakeVFs makes the test binary act as the plugin with the VF settings
// kept in the named file instead of a PF (the host kernel has no SR-IOV
// PF): see fakeVFs.
const envFakeVFs = "NETCLASS_SRIOV_TEST_FAKE_VFS"

func TestMain(m *testing.M) {
	if path := os.Getenv(envFakeVFs); path != "" {
		p := plugin{sys: sysfs.New(os.Getenv(EnvSysfsRoot)), vfs: fakeVFs{path: path}}
		attach.Main(p.funcs(), "netclass-sriov", "VF settings kept in "+path+" (test)")
		return
	}
	os.Exit(m.Run())
}
