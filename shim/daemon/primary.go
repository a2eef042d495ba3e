package daemon

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/shim/sandboxes"
)

// primaryNetwork gives the agent the node's pod sandboxes, as NRI reports
// them, for NetworkQoS on the pods' primary interface (the default
// network): the runtime's hooks keep the record, each change asks the
// agent for a sync, and a new sandbox a NetworkQoS selects gets its rules
// in RunPodSandbox, before its containers start. The record also maps
// the foreign attachments' sandboxes to their pods (foreignAttachments).
func (d *Daemon) primaryNetwork(ctx context.Context, events record.EventRecorder) {
	sbs := &sandboxes.Record{OnChange: d.qos.Trigger}
	d.qos.Primary = ruleagent.NewPrimary(sbs.List, qosport.HostEnd, qosport.RemovePortRules)
	d.qos.Primary.Ready = sbs.Synchronized
	d.qos.Primary.GC = qosport.RemoveStaleHostRules
	d.runtime.Sandboxes = &sandboxWatcher{record: sbs, agent: d.qos,
		qos:  qosLister{d.factory.Netclass().V1alpha1().NetworkQoSes().Lister()},
		pods: podGetter{cache: d.podFac.Core().V1().Pods().Lister(), client: d.kube}}
	d.foreignAttachments(ctx, sbs, events)
}

// sandboxWatcher is the runtime's view of the node's sandboxes
// (nri.SandboxWatcher).
type sandboxWatcher struct {
	record *sandboxes.Record
	agent  *ruleagent.Agent
	qos    qosLister
	pods   podGetter
}

// Started records the sandbox and, when its namespace has NetworkQoS
// objects, gives its primary interface their rules. A failure does not
// fail the sandbox: the agent retries, and the object's status.nodes
// reports it.
func (w *sandboxWatcher) Started(ctx context.Context, s sandboxes.Sandbox) {
	start := time.Now()
	guarded := w.started(ctx, s)
	klog.FromContext(ctx).V(2).Info("Sandbox recorded", "pod", s.Pod.String(), "guarded", guarded,
		"elapsedMs", float64(time.Since(start).Microseconds())/1000)
}

// started records the sandbox and guards its primary interface; guarded
// says whether the namespace has NetworkQoS objects (the guard ran).
func (w *sandboxWatcher) started(ctx context.Context, s sandboxes.Sandbox) (guarded bool) {
	w.record.Started(s)
	if objs, err := w.qos.NetworkQoS(s.Pod.Namespace); err != nil || len(objs) == 0 || s.NetNS == "" {
		return false // nothing can select it (the agent's sync reports a listing error)
	}
	pod, err := w.pods.Pod(ctx, s.Pod.Namespace, s.Pod.Name)
	if err == nil && pod.UID != s.UID {
		return false // another pod of that name: the agent's sync sorts it out
	}
	if err == nil {
		err = w.agent.GuardPrimary(ctx, s, pod)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "NetworkQoS of the primary interface not in place before the pod starts; the agent retries", "pod", s.Pod)
	}
	return true
}

func (w *sandboxWatcher) Stopped(uid types.UID, id string) { w.record.Stopped(uid, id) }

func (w *sandboxWatcher) Synchronized(list []sandboxes.Sandbox) { w.record.Replace(list) }
