package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/internal/endpoints"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/nri"
)

// Run serves until ctx ends, or until a policy kind it started without
// is served (an error wrapping ErrRestartForKind: the daemon is to be
// started again).
func (d *Daemon) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopServing, err := d.serveHTTP(ctx)
	if err != nil {
		return err
	}
	defer stopServing()
	d.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events("")})
	defer d.events.Shutdown()
	stopInformers, err := d.startInformers(ctx)
	if err != nil {
		return err
	}
	defer stopInformers()
	if err := d.publisher.Prime(ctx); err != nil {
		return err
	}
	helper, err := d.startKubeletPlugin(ctx)
	if err != nil {
		return err
	}
	defer helper.Stop()
	logger.Info("netclass-dra started", "node", d.cfg.NodeName, "kubeletDir", d.cfg.KubeletDir, "nriSocket", d.cfg.NRISocket,
		"cniBinDirs", d.cfg.CNIBinDirs, "stateDir", d.cfg.StateDir)
	d.runLoops(ctx, helper, cancel)
	d.runtime.Wait()
	if err := podpolicy.TidyGuard(); err != nil { // nothing opens a port any more
		logger.Error(err, "Tidying the port guard's sets at exit failed: an older netclass started next would find the ports opened since the last sync closed until its agent opens them")
	}
	if err := context.Cause(ctx); errors.Is(err, ErrRestartForKind) {
		logger.Info("netclass-dra stopped to restart", "reason", err.Error())
		return err
	}
	logger.Info("netclass-dra stopped")
	return nil
}

// serveHTTP serves the probes, /metrics and, next to the probes (loopback by
// default: it names pods and policies), /debug/attachments.
func (d *Daemon) serveHTTP(ctx context.Context) (stop func(), err error) {
	eps := endpoints.New(d.cfg.HealthAddress, d.cfg.MetricsAddress, probes{ready: d.registered, live: d.runtime.Responsive}, d.registry)
	for _, e := range eps {
		if e.Addr == d.cfg.HealthAddress {
			e.Mux.Handle("GET /debug/attachments", attachmentsHandler(d.qos.Outcomes))
		}
	}
	return endpoints.Serve(ctx, eps)
}

// runLoops runs the daemon's loops until ctx ends and all of them returned.
func (d *Daemon) runLoops(ctx context.Context, helper *kubeletplugin.Helper, cancel context.CancelCauseFunc) {
	loops := []func(){
		func() { d.watchLaterKinds(ctx, cancel) },
		func() { d.watchNADs(ctx) },
		func() { d.publisher.Run(ctx, d.metrics.Sink(helper)) },
		func() { nri.Run(ctx, d.cfg.NRISocket, d.runtime, time.Second) },
		func() { d.reportNodeNetworks(ctx) },
		func() { d.waitReady(ctx, helper) },
		func() { d.qos.Run(ctx) },
		func() { d.qos.Audit(ctx) },
	}
	if !d.cfg.NoNodeDevices {
		loops = append(loops, func() { d.devices.Run(ctx, d.nodeNetsChanged) })
	}
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Go(loop)
	}
	<-ctx.Done()
	wg.Wait()
}
