package nri

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/sandboxes"
)

// SandboxWatcher is told of every pod sandbox of the node, with or without
// netclass attachments: netclass-dra records their network namespaces and
// gives the pods a NetworkQoS selects on the default network their rules
// (shim/ruleagent). Started runs in RunPodSandbox, before netclass's own
// attachments and before the pod's containers start, within NRI's budget
// (ctx); it cannot fail the sandbox. A watcher must cost next to nothing
// for a pod it has nothing to do for.
type SandboxWatcher interface {
	Started(ctx context.Context, s sandboxes.Sandbox)
	Stopped(uid types.UID, id string)
	Synchronized(list []sandboxes.Sandbox)
}

// SandboxOf is the record of an NRI pod sandbox ("" NetNS for host network).
func SandboxOf(pod *api.PodSandbox) sandboxes.Sandbox {
	return sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: pod.GetNamespace(), Name: pod.GetName()},
		UID: types.UID(pod.GetUid()), ID: pod.GetId(), NetNS: NetNS(pod)}
}

// sandboxStarted tells the watcher of a sandbox, within the hook's budget
// (ctx's deadline).
func (p *Plugin) sandboxStarted(ctx context.Context, pod *api.PodSandbox) {
	if p.Sandboxes != nil {
		p.Sandboxes.Started(ctx, SandboxOf(pod))
	}
}

func (p *Plugin) sandboxStopped(pod *api.PodSandbox) {
	if p.Sandboxes != nil {
		p.Sandboxes.Stopped(types.UID(pod.GetUid()), pod.GetId())
	}
}

func (p *Plugin) sandboxesSynchronized(pods []*api.PodSandbox) {
	if p.Sandboxes == nil {
		return
	}
	list := make([]sandboxes.Sandbox, 0, len(pods))
	for _, pod := range pods {
		list = append(list, SandboxOf(pod))
	}
	p.Sandboxes.Synchronized(list)
}
