// Package serve runs the HTTP side every command shares: exporter-toolkit listeners (TLS, basic auth), the landing
// page, the telemetry path and the /-/healthy and /-/ready endpoints.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
)

// Flags are the web flags of one command.
type Flags struct {
	Toolkit       *web.FlagConfig
	TelemetryPath *string
}

// AddFlags adds --web.listen-address, --web.config.file, --web.systemd-socket and --web.telemetry-path to cmd.
func AddFlags(cmd *kingpin.CmdClause, defaultAddress string) *Flags {
	return &Flags{
		Toolkit:       kingpinflag.AddFlags(cmd, defaultAddress),
		TelemetryPath: cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String(),
	}
}

// Server is one command's HTTP server. Mux takes the command's own routes; readiness starts false.
type Server struct {
	Mux    *http.ServeMux
	flags  *Flags
	logger *slog.Logger
	ready  atomic.Bool
	// readyFunc, when set, decides readiness at each request instead of ready.
	readyFunc atomic.Pointer[func() bool]
	// bound are the listeners Bind opened; ListenAndServe serves on them.
	bound []net.Listener
}

// New builds the server with the landing page, the metrics handler under the telemetry path, and health endpoints.
func New(logger *slog.Logger, flags *Flags, name, description string, metrics http.Handler) (*Server, error) {
	s := &Server{Mux: http.NewServeMux(), flags: flags, logger: logger}
	s.Mux.Handle(*flags.TelemetryPath, metrics)
	s.Mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "Healthy.")
	})
	s.Mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !s.isReady() {
			http.Error(w, "Not ready.", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "Ready.")
	})
	if *flags.TelemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        name,
			Description: description,
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: *flags.TelemetryPath, Text: "Metrics"},
				{Address: "/-/healthy", Text: "Health"},
				{Address: "/-/ready", Text: "Readiness"},
			},
		})
		if err != nil {
			return nil, err
		}
		s.Mux.Handle("/", landing)
	}
	return s, nil
}

// SetReady flips /-/ready.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// SetReadyFunc makes /-/ready ask ready at each request (for readiness that comes and goes, such as leadership).
func (s *Server) SetReadyFunc(ready func() bool) { s.readyFunc.Store(&ready) }

func (s *Server) isReady() bool {
	if f := s.readyFunc.Load(); f != nil {
		return (*f)()
	}
	return s.ready.Load()
}

// Bind checks the web config and opens the listen addresses, so a command learns that it cannot serve before it
// starts any work. ListenAndServe then serves on them. Systemd and vsock listeners are left to ListenAndServe.
func (s *Server) Bind() error {
	if path := *s.flags.Toolkit.WebConfigFile; path != "" {
		if err := web.Validate(path); err != nil {
			return fmt.Errorf("web config %s: %w", path, err)
		}
	}
	if systemd := s.flags.Toolkit.WebSystemdSocket; systemd != nil && *systemd {
		return nil
	}
	for _, address := range *s.flags.Toolkit.WebListenAddresses {
		if strings.HasPrefix(address, "vsock://") {
			continue
		}
		l, err := net.Listen("tcp", address)
		if err != nil {
			for _, b := range s.bound {
				b.Close()
			}
			s.bound = nil
			return err
		}
		s.bound = append(s.bound, l)
	}
	return nil
}

// ListenAndServe serves on the flag addresses (those Bind opened, if it was called) until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if len(s.bound) > 0 {
		return s.run(ctx, func(srv *http.Server) error { return web.ServeMultiple(s.bound, srv, s.flags.Toolkit, s.logger) })
	}
	return s.run(ctx, func(srv *http.Server) error { return web.ListenAndServe(srv, s.flags.Toolkit, s.logger) })
}

// Serve serves on l until ctx ends; tests use it with a loopback listener.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	return s.run(ctx, func(srv *http.Server) error { return web.Serve(l, srv, s.flags.Toolkit, s.logger) })
}

func (s *Server) run(ctx context.Context, serve func(*http.Server) error) error {
	srv := &http.Server{Handler: s.Mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- serve(srv) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			return err
		}
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
