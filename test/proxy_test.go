package test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy forwards a loopback port to an upstream address and can cut the
// link: cut closes every open connection and refuses new ones until
// restore, as a network partition between one process and a service.
type tcpProxy struct {
	l        net.Listener
	upstream string

	mu    sync.Mutex
	cutAt bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newTCPProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{l: l, upstream: upstream, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

// addr is the proxy's listen address.
func (p *tcpProxy) addr() string { return p.l.Addr().String() }

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cutAt {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *tcpProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// cut closes every connection and refuses new ones until restore.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	p.cutAt = true
	p.mu.Unlock()
	p.closeAll()
}

// restore lets connections through again.
func (p *tcpProxy) restore() {
	p.mu.Lock()
	p.cutAt = false
	p.mu.Unlock()
}
