package attach

import "github.com/containernetworking/cni/pkg/version"

// Versions are the CNI spec versions every netclass plugin speaks.
func Versions() version.PluginInfo {
	return version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
}

// About is what a plugin prints when run without CNI_COMMAND.
func About(plugin, what string) string {
	return plugin + ": " + what + " (netclass)"
}
