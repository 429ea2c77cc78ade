//go:build linux

package netstamp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"testing"
	"time"
)

// A chunk read late still carries the time the kernel received it.
func TestRXTimestampIsArrivalNotRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn := dialStamped(t, ln)
	defer conn.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	readsLate(t, srv, conn)
	srv.Close()
	if _, err := conn.Read(make([]byte, 64)); err != io.EOF {
		t.Errorf("after close: %v, want io.EOF", err)
	}
}

// dialStamped connects to ln with receive timestamps on; the test is skipped where the kernel refuses.
func dialStamped(t *testing.T, ln net.Listener) net.Conn {
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Enable(c)
	if err != nil {
		c.Close()
		t.Skipf("kernel refuses SO_TIMESTAMPING here: %v", err)
	}
	return conn
}

// readsLate has srv write three chunks, each read 60 ms late through conn, and checks that RXTime gives
// each the time it arrived, not the time it was read.
func readsLate(t *testing.T, srv, conn net.Conn) {
	t.Helper()
	buf := make([]byte, 64)
	// The kernel turns stamping on a moment after the first socket asks: the first read may lack one.
	srv.Write([]byte("warm\n"))
	conn.Read(buf)
	time.Sleep(20 * time.Millisecond)
	for i := range 3 {
		sent := time.Now()
		if _, err := srv.Write([]byte("data: x\n\n")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond) // the client is late
		if _, err := conn.Read(buf); err != nil {
			t.Fatal(err)
		}
		read := time.Now()
		at, ok := RXTime(conn)
		if !ok {
			t.Fatal("no receive timestamp after a read")
		}
		if d := at.Sub(sent); d < -time.Millisecond || d > 20*time.Millisecond {
			t.Errorf("read %d: kernel time %v after the write, want about 0 (read %v after)", i, d, read.Sub(sent))
		}
	}
}

func TestSCMTimestampRejectsJunk(t *testing.T) {
	for _, b := range [][]byte{nil, {1, 2, 3}, make([]byte, 16), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0, 0x25, 0, 0, 0}} {
		if ts := scmTimestamp(b); ts != 0 {
			t.Errorf("scmTimestamp(%v) = %d", b, ts)
		}
	}
}

// Over TLS the chunk times are still the kernel's: RXTime looks through the TLS connection to the
// timestamped TCP connection it reads from.
func TestRXTimestampThroughTLS(t *testing.T) {
	cert, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn := tls.Client(dialStamped(t, ln), &tls.Config{InsecureSkipVerify: true}) // the test's own certificate
	defer conn.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go srv.(*tls.Conn).Handshake()
	if err := conn.Handshake(); err != nil {
		t.Fatal(err)
	}
	readsLate(t, srv, conn)
}

// selfSigned makes a throwaway certificate for 127.0.0.1.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
