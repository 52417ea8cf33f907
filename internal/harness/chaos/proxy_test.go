package chaos

import (
	"bufio"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// frame builds a length-prefixed frame.
func frame(body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func i16(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
func i32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// echoBroker answers each request frame with a response frame that carries
// the same correlation id, a flexible header (one zero byte), throttle 0
// and error code 0, as an EndTxn v4 response.
func echoBroker(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					f, err := readFrame(r)
					if err != nil {
						return
					}
					corr := int32(binary.BigEndian.Uint32(f[8:]))
					if _, err := c.Write(frame(i32(corr), []byte{0}, i32(0), i16(0))); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func endTxnRequest(corr int32) []byte { return frame(i16(26), i16(4), i32(corr), i16(-1)) }

func TestProxySpoilsEndTxnAnswers(t *testing.T) {
	p, err := NewProxy("127.0.0.1:0", echoBroker(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	code := func(corr int32) int16 {
		t.Helper()
		if _, err := c.Write(endTxnRequest(corr)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(f[4:])); got != corr {
			t.Fatalf("answer to correlation id %d carries %d", corr, got)
		}
		return int16(binary.BigEndian.Uint16(f[13:]))
	}
	if got := code(1); got != 0 {
		t.Fatalf("unspoiled answer has error code %d", got)
	}
	p.SpoilEndTxnAnswers(1, kerr.NotCoordinator.Code)
	if got := code(2); got != kerr.NotCoordinator.Code {
		t.Fatalf("spoiled answer has error code %d, want NOT_COORDINATOR", got)
	}
	if got := code(3); got != 0 {
		t.Fatalf("the spoil outlived its count: error code %d", got)
	}
	if p.Spoiled() != 1 {
		t.Fatalf("Spoiled() = %d, want 1", p.Spoiled())
	}
	// Code 0: the connection is reset once the broker answered.
	p.SpoilEndTxnAnswers(1, 0)
	if _, err := c.Write(endTxnRequest(4)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readFrame(r); err == nil {
		t.Fatal("the answer came through although the proxy was to reset the connection")
	}
}

func TestProxyBlackholeAndReset(t *testing.T) {
	p, err := NewProxy("127.0.0.1:0", echoBroker(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	p.Blackhole(true)
	if _, err := c.Write(endTxnRequest(1)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := readFrame(r); err == nil {
		t.Fatal("an answer passed the blackhole")
	}
	p.Blackhole(false)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readFrame(r); err != nil {
		t.Fatalf("the held request got no answer once the blackhole ended: %v", err)
	}
	p.Reset()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readFrame(r); err == nil {
		t.Fatal("the connection survived Reset")
	}
	p.Refuse(true)
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, _ = c2.Write(endTxnRequest(1))
		_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := readFrame(bufio.NewReader(c2)); err == nil {
			t.Fatal("a connection got through while the proxy refused")
		}
		c2.Close()
	}
}
