package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// proxied starts a proxy to an echo server and returns it with a
// connection through it that has made one round trip.
func proxied(t *testing.T) (*Proxy, net.Conn) {
	t.Helper()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if got, err := roundTrip(c, "hello"); err != nil || got != "hello\n" {
		t.Fatalf("through proxy: %q, %v", got, err)
	}
	return p, c
}

func TestProxyForwardsCutsAndHeals(t *testing.T) {
	p, c := proxied(t)

	p.Cut()
	// The open connection is gone: a read sees EOF or a reset.
	if _, err := roundTrip(c, "again"); err == nil {
		t.Fatal("connection survived Cut")
	}
	// New connections are accepted by the kernel but closed at once.
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
		_, rerr := c2.Read(make([]byte, 1))
		var ne net.Error
		if rerr == nil || (errors.As(rerr, &ne) && ne.Timeout()) {
			t.Fatalf("new connection during Cut was not closed: %v", rerr)
		}
		_ = c2.Close()
	}

	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, "back"); err != nil || got != "back\n" {
		t.Fatalf("after Heal: %q, %v", got, err)
	}
}

// TestProxyFreezesAndThaws: while frozen the connection stays open and
// nothing goes through; after Thaw what was sent meanwhile arrives.
func TestProxyFreezesAndThaws(t *testing.T) {
	p, c := proxied(t)

	p.Freeze()
	p.Freeze() // twice is once
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatalf("write while frozen: %v (the connection must stay open)", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, rerr := c.Read(make([]byte, 16))
	var ne net.Error
	if !errors.As(rerr, &ne) || !ne.Timeout() {
		t.Fatalf("read while frozen = %d bytes, %v; want nothing until the deadline", n, rerr)
	}

	p.Thaw()
	p.Thaw() // twice is once
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("after Thaw: %q, %v; want the line sent while frozen", line, err)
	}
}
