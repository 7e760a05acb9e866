package faultproxy

import (
	"errors"
	"net"
	"sync"
)

// Proxy forwards TCP connections from its listen address to a target.
type Proxy struct {
	target string
	ln     net.Listener

	mu  sync.Mutex
	cut bool
	// thawed is closed while the proxy forwards; Freeze replaces it with
	// an open channel that the pipes wait on, Thaw closes it.
	thawed chan struct{}
	conns  map[net.Conn]struct{}
	done   chan struct{}
	wg     sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (random port) forwarding to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	thawed := make(chan struct{})
	close(thawed)
	p := &Proxy{target: target, ln: ln, thawed: thawed, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's address as a NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Cut closes every open connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Freeze stops forwarding bytes on every connection, open or new, and
// keeps the connections open until Thaw: what a peer sees of a process
// stopped with SIGSTOP, or of a link that drops packets without a reset.
// What is sent meanwhile waits in the proxy and the kernel's buffers and
// is delivered after Thaw. Freezing a frozen proxy does nothing.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// Thaw forwards again what Freeze held, and what follows.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// gate returns a channel closed while the proxy forwards.
func (p *Proxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	close(p.done)
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.conns[up] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case <-p.gate():
			case <-p.done:
				n = 0
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
