// Package devredis runs the in-process miniredis fallback that `make demo`
// and `make test` use on a machine without redis-server. It is a labelled
// fallback, never what CI or production uses.
//
// miniredis keeps time still unless told otherwise: keys with a TTL never
// expire by themselves. kjob depends on expiry (a crashed leader's lease, a
// crashed worker's claim), so Start advances miniredis's clock with the
// wall clock.
package devredis

import (
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Server is a running miniredis whose TTLs follow the wall clock.
type Server struct {
	*miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start starts miniredis on addr ("" or "127.0.0.1:0" picks a free port).
func Start(addr string) (*Server, error) {
	m := miniredis.NewMiniRedis()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := m.StartAddr(addr); err != nil {
		return nil, err
	}
	s := &Server{Miniredis: m, stop: make(chan struct{})}
	m.SetTime(time.Now())
	s.wg.Add(1)
	go s.tick()
	return s, nil
}

// tick moves miniredis's clock (TIME, and TTLs) forward with the wall clock.
func (s *Server) tick() {
	defer s.wg.Done()
	last := time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.SetTime(now)
			s.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Close stops the clock and the server.
func (s *Server) Close() {
	close(s.stop)
	s.wg.Wait()
	s.Miniredis.Close()
}
