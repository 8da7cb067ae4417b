// Package grpcserve runs a simulator's gRPC service on listeners: in the foreground until a context ends (Serve), or
// in the background until Close (Start), as the simulators' tests and gkesim serve them.
package grpcserve

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
)

// Listeners serves one gRPC service, registered by register, on every listener it is given.
type Listeners struct {
	register func(*grpc.Server)
	mu       sync.Mutex
	stops    []func()
}

// New serves the service that register registers on a gRPC server.
func New(register func(*grpc.Server)) *Listeners { return &Listeners{register: register} }

// Serve answers gRPC on l until ctx ends.
func (s *Listeners) Serve(ctx context.Context, l net.Listener) error {
	gs := grpc.NewServer()
	s.register(gs)
	stop := context.AfterFunc(ctx, gs.Stop)
	defer stop()
	return gs.Serve(l)
}

// Start serves on addr (127.0.0.1:0 when empty) in the background until Close, and returns the address to dial.
func (s *Listeners) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ctx, l) // ends only when Close cancels ctx
	}()
	s.mu.Lock()
	s.stops = append(s.stops, func() { cancel(); <-done })
	s.mu.Unlock()
	return l.Addr().String(), nil
}

// Close stops every listener Start opened.
func (s *Listeners) Close() {
	s.mu.Lock()
	stops := s.stops
	s.stops = nil
	s.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}
