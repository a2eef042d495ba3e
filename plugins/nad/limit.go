package nad

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/nadfile"
)

// MaxPerSandbox bounds the interfaces netclass-nad makes in one pod sandbox
// (contract.MaxInterfacesPerPod): a pod names its NADs in an annotation its
// users write, and may name one NAD again and again.
const MaxPerSandbox = contract.MaxInterfacesPerPod

// underLimit refuses an ADD of a new interface in a sandbox that holds
// MaxPerSandbox already: libcni's result cache (nadfile.CacheDir) keeps one
// file per attachment, "<network>-<container ID>-<interface>", until its
// DEL. ADD again of an interface the sandbox has (a retry) is not counted.
func (c *call) underLimit() error {
	dir := filepath.Join(nadfile.CacheDir(c.conf.StateDir), "results")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return types.NewError(types.ErrInternal, "netclass-nad: read its result cache", err.Error())
	}
	infix, self := "-"+c.rt.ContainerID+"-", "-"+c.rt.ContainerID+"-"+c.rt.IfName
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), self) {
			return nil
		}
		if strings.Contains(e.Name(), infix) {
			n++
		}
	}
	if n >= MaxPerSandbox {
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("netclass-nad: the pod has %d interfaces through netclass's NADs already, the most one may have", n), "")
	}
	return nil
}
