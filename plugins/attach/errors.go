package attach

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// Invalid is CNI error 7 (invalid network configuration).
func Invalid(format string, args ...any) error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(format, args...), "")
}

// BadNetNS is CNI error 8 (the container's namespace cannot be used).
func BadNetNS(err error) error {
	return types.NewError(types.ErrInvalidNetNS, err.Error(), "")
}

// UsableNetNS returns CNI error 8 unless path is a network namespace.
func UsableNetNS(path string) error {
	n, err := netns.Open(path)
	if err != nil {
		return BadNetNS(err)
	}
	return n.Close()
}

// ErrPluginNotAvailable is the spec's code 50 (STATUS: the plugin cannot
// serve ADDs now). cni v1.3.0, the version the upstream plugins ship with,
// predates its constant; v1.3.1 would link OpenTelemetry and net/http into
// every plugin through pkg/invoke.
const ErrPluginNotAvailable uint = 50

// Unavailable is CNI error 50, STATUS's "cannot serve ADDs now".
func Unavailable(err error) error {
	return types.NewError(ErrPluginNotAvailable, err.Error(), "")
}

// nodeCannot is an error saying this node cannot do what the configuration
// asks (its kernel lacks a feature the QoS needs: nft.FeatureError): CNI
// error 7, since retrying will not change it.
type nodeCannot interface {
	error
	InvalidConfiguration()
}

// Internal keeps a CNI error as it is and turns anything else into error
// 999 carrying the message (and, when given, the undo failures as details).
// A device another network owns, or a kernel feature the configuration
// needs and the node lacks, is error 7 with the whole message.
func Internal(err error, undoErr error) error {
	var e *types.Error
	var owned *link.OwnedError
	var cannot nodeCannot
	switch {
	case errors.As(err, &owned):
		e = types.NewError(types.ErrInvalidNetworkConfig, owned.Error(), "")
	case errors.As(err, &cannot):
		e = types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if e != nil || errors.As(err, &e) {
		if undoErr != nil {
			e.Details = joinDetails(e.Details, "cleanup after failure: "+undoErr.Error())
		}
		return e
	}
	details := ""
	if undoErr != nil {
		details = "cleanup after failure: " + undoErr.Error()
	}
	return types.NewError(types.ErrInternal, err.Error(), details)
}

func joinDetails(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
