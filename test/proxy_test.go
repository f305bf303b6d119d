package test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// linkMode is the state of a tcpProxy's link.
type linkMode int

const (
	// linkOpen forwards traffic both ways.
	linkOpen linkMode = iota
	// linkReset: every connection was reset; new ones are accepted and
	// reset at once (a peer that refuses: ECONNRESET on both sides).
	linkReset
	// linkBlackhole: connections stay open and new ones are accepted, but
	// nothing is forwarded (packets silently dropped); bytes already read
	// are held and delivered if the link is restored, as TCP's
	// retransmission would, unless an end gave up and closed first.
	linkBlackhole
)

// tcpProxy forwards a loopback port to an upstream address and can cut the
// link, as a network partition between one process and a service: cut
// resets every connection and every new one until restore; blackhole
// silently stops all traffic until restore. A connection accepted while the
// link is cut never reaches the upstream, whatever the interleaving of
// accept, dial and cut.
type tcpProxy struct {
	l        net.Listener
	upstream string

	mu      sync.Mutex
	mode    linkMode
	flowing chan struct{} // closed while traffic may flow
	conns   map[*proxyConn]bool
	closed  bool
	wg      sync.WaitGroup
}

// proxyConn is one proxied connection: the client side and, once dialled,
// the upstream side.
type proxyConn struct {
	client, up net.Conn
	done       chan struct{}
	once       sync.Once
}

func newTCPProxy(t testing.TB, upstream string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &tcpProxy{l: l, upstream: upstream, conns: map[*proxyConn]bool{}, flowing: flowing}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is the proxy's listen address.
func (p *tcpProxy) addr() string { return p.l.Addr().String() }

// close stops the proxy and waits for its goroutines.
func (p *tcpProxy) close() {
	p.l.Close()
	p.mu.Lock()
	p.closed = true
	for pc := range p.conns {
		p.dropLocked(pc, false)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mode == linkReset || p.closed {
			p.mu.Unlock()
			reset(c)
			continue
		}
		pc := &proxyConn{client: c, done: make(chan struct{})}
		p.conns[pc] = true
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pc)
	}
}

// serve dials the upstream once traffic may flow, then forwards both ways.
func (p *tcpProxy) serve(pc *proxyConn) {
	defer p.wg.Done()
	if !p.waitFlowing(pc) {
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
	if err != nil {
		p.drop(pc)
		return
	}
	p.mu.Lock()
	if !p.conns[pc] { // cut (or closed) while dialling
		p.mu.Unlock()
		reset(up)
		return
	}
	pc.up = up
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipe(pc, up, pc.client)
	go p.pipe(pc, pc.client, up)
}

// waitFlowing blocks while the link is black-holed; false if pc was dropped.
func (p *tcpProxy) waitFlowing(pc *proxyConn) bool {
	for {
		p.mu.Lock()
		f := p.flowing
		p.mu.Unlock()
		select {
		case <-pc.done:
			return false
		case <-f:
		}
		p.mu.Lock()
		ok := p.flowing == f // not black-holed again meanwhile
		p.mu.Unlock()
		if ok {
			return true
		}
	}
}

// pipe copies src to dst, holding what it read while the link is
// black-holed.
func (p *tcpProxy) pipe(pc *proxyConn, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitFlowing(pc) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.drop(pc)
}

func (p *tcpProxy) drop(pc *proxyConn) {
	p.mu.Lock()
	p.dropLocked(pc, false)
	p.mu.Unlock()
}

// dropLocked closes both sides of pc (resetting them if rst) and forgets it.
func (p *tcpProxy) dropLocked(pc *proxyConn, rst bool) {
	delete(p.conns, pc)
	pc.once.Do(func() {
		close(pc.done)
		for _, c := range []net.Conn{pc.client, pc.up} {
			switch {
			case c == nil:
			case rst:
				reset(c)
			default:
				c.Close()
			}
		}
	})
}

// reset closes c with an RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// cut resets every connection and every new one until restore.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = linkReset
	for pc := range p.conns {
		p.dropLocked(pc, true)
	}
}

// blackhole stops all traffic, silently, until restore: connections stay
// open, new ones are accepted, nothing reaches the other side.
func (p *tcpProxy) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != linkBlackhole {
		p.flowing = make(chan struct{})
	}
	p.mode = linkBlackhole
}

// restore lets traffic through again.
func (p *tcpProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == linkBlackhole {
		close(p.flowing)
	}
	p.mode = linkOpen
}

// echoServer is an upstream that echoes each line back; it counts the
// connections it accepted.
func echoServer(t *testing.T) (addr string, accepted func() int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// roundTrip writes a line on c and reads it back within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo mismatch: " + line)
	}
	return nil
}

// dialWorking dials the proxy and checks that a line round-trips through
// it (when, e.g. "before the cut", names the moment in the failure). The
// connection is closed when the test ends.
func dialWorking(t *testing.T, p *tcpProxy, when string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	return c, r
}

func TestProxyResetCut(t *testing.T) {
	up, _ := echoServer(t)
	p := newTCPProxy(t, up)
	c, r := dialWorking(t, p, "before the cut")
	p.cut()
	var ne net.Error
	if err := roundTrip(c, r, 5*time.Second); err == nil {
		t.Fatal("an open connection still works after the cut")
	} else if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("cut connection timed out instead of being reset: %v", err)
	}
	c2, err := net.Dial("tcp", p.addr())
	if err == nil {
		err = roundTrip(c2, bufio.NewReader(c2), 5*time.Second)
		c2.Close()
	}
	if err == nil {
		t.Fatal("a new connection works during the cut")
	}
	p.restore()
	dialWorking(t, p, "after restore")
}

func TestProxyBlackhole(t *testing.T) {
	up, accepted := echoServer(t)
	p := newTCPProxy(t, up)
	c, r := dialWorking(t, p, "before the black-hole")
	p.blackhole()
	// An open connection: the write succeeds, no answer comes.
	err := roundTrip(c, r, 300*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("during the black-hole: %v; want a read timeout (silence, not a reset)", err)
	}
	// A new connection is accepted but never reaches the upstream.
	before := accepted()
	c2, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatalf("dial during the black-hole: %v (want accepted)", err)
	}
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	if err := roundTrip(c2, r2, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("new connection during the black-hole: %v; want a read timeout", err)
	}
	if n := accepted(); n != before {
		t.Fatalf("upstream accepted %d connections during the black-hole", n-before)
	}
	// Restored: the held bytes arrive (the late echo of the first ping on
	// c, both pings on c2) and both connections work again.
	p.restore()
	for _, x := range []struct {
		c    net.Conn
		r    *bufio.Reader
		held int
	}{{c, r, 1}, {c2, r2, 1}} {
		_ = x.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for range x.held {
			if line, err := x.r.ReadString('\n'); err != nil || line != "ping\n" {
				t.Fatalf("held bytes after restore: %q, %v", line, err)
			}
		}
		if err := roundTrip(x.c, x.r, 5*time.Second); err != nil {
			t.Fatalf("after restore: %v", err)
		}
	}
}

// TestProxyCutRacesNewConnections dials while the link is cut and restored
// over and over: every connection made after a cut returned must fail while
// it lasts, whichever of accept, dial and cut came first.
func TestProxyCutRacesNewConnections(t *testing.T) {
	up, _ := echoServer(t)
	p := newTCPProxy(t, up)
	for range 50 {
		var wg sync.WaitGroup
		conns := make(chan net.Conn, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c, err := net.Dial("tcp", p.addr()); err == nil {
					conns <- c
				}
			}()
		}
		p.cut()
		wg.Wait()
		close(conns)
		for c := range conns {
			if err := roundTrip(c, bufio.NewReader(c), 2*time.Second); err == nil {
				t.Fatal("a connection dialled around a cut forwards traffic while the link is cut")
			}
			c.Close()
		}
		p.restore()
	}
}
