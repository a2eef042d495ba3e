package attach

import (
	"fmt"
	"os"

	"github.com/netclass-dev/netclass/conf/netconf"
)

// Warn writes a warning line to stderr (netconf.WarningPrefix): the ADD
// goes on, but did something other than the configuration says, and the
// user must hear of it (netclass-dra makes it a Warning Event on the pod).
func Warn(format string, args ...any) {
	fmt.Fprintf(os.Stderr, netconf.WarningPrefix+format+"\n", args...)
}
