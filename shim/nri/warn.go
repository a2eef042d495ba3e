package nri

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// EventAttachWarning is the reason of a Warning Event on a pod whose
// attachment a plugin made otherwise than its configuration says, though it
// succeeded (the default queue missing from the node's kernel: tbf alone
// shapes it). The message is the plugin's warning.
const EventAttachWarning = "NetworkAttachWarning"

// warn records the plugins' warnings of a pod's attachments as Events.
func (p *Plugin) warn(steps []Step) {
	for _, s := range steps {
		n := s.Device().Network
		name := n.Name
		if n.Namespace != "" {
			name = n.Namespace + "/" + n.Name
		}
		for _, w := range s.Warnings {
			p.Reporter.PodEvent(s.Pod, corev1.EventTypeWarning, EventAttachWarning,
				fmt.Sprintf("interface %s (%s %s): %s", s.IfName, n.Kind, name, w))
		}
	}
}
