package nri

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"k8s.io/klog/v2"
)

// PluginName and PluginIndex identify netclass-dra to NRI.
const (
	PluginName  = "netclass-dra"
	PluginIndex = "50"
)

// Configure subscribes to the pod sandbox events.
func (p *Plugin) Configure(ctx context.Context, _, runtime, version string) (api.EventMask, error) {
	klog.FromContext(p.logCtx).Info("Connected to the container runtime through NRI", "runtime", runtime, "version", version)
	if p.OnConnect != nil {
		p.OnConnect()
	}
	return api.MustParseEventMask("RunPodSandbox", "StopPodSandbox", "RemovePodSandbox"), nil
}

// Shutdown is called when the runtime shuts down.
func (p *Plugin) Shutdown(context.Context) {
	klog.FromContext(p.logCtx).Info("The container runtime is shutting down; reconnecting when it is back")
}

// Run connects to NRI at socket and serves the plugin until ctx ends,
// reconnecting (every retry, default 1 s) whenever the runtime goes away.
func Run(ctx context.Context, socket string, p *Plugin, retry time.Duration) error {
	logger := klog.FromContext(ctx)
	if retry <= 0 {
		retry = time.Second
	}
	for {
		err := serve(ctx, socket, p)
		if ctx.Err() != nil {
			return nil
		}
		logger.Info("NRI connection ended; reconnecting", "socket", socket, "err", err, "retry", retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

func serve(ctx context.Context, socket string, p *Plugin) error {
	s, err := stub.New(p, stub.WithSocketPath(socket), stub.WithPluginName(PluginName), stub.WithPluginIdx(PluginIndex),
		stub.WithOnClose(func() {}), stub.WithLogger(nriLogger{klog.LoggerWithName(klog.FromContext(ctx), "nri").WithCallDepth(1)}))
	if err != nil {
		return fmt.Errorf("create NRI stub: %w", err)
	}
	p.setBudget(s.RequestTimeout)
	if err := s.Run(ctx); err != nil {
		return fmt.Errorf("NRI plugin on %s: %w", socket, err)
	}
	return nil
}

// nriLogger routes the NRI stub's messages to klog.
type nriLogger struct{ logger klog.Logger }

func (l nriLogger) Debugf(_ context.Context, format string, args ...any) {
	l.logger.V(4).Info(fmt.Sprintf(format, args...))
}

func (l nriLogger) Infof(_ context.Context, format string, args ...any) {
	l.logger.V(2).Info(fmt.Sprintf(format, args...))
}

func (l nriLogger) Warnf(_ context.Context, format string, args ...any) {
	l.logger.Info("Warning: " + fmt.Sprintf(format, args...))
}

func (l nriLogger) Errorf(_ context.Context, format string, args ...any) {
	l.logger.Error(nil, fmt.Sprintf(format, args...))
}
