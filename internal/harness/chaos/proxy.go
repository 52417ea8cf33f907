package chaos

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Proxy is a TCP proxy between the apps and the broker, where the harness
// cuts the network. It reads the Kafka protocol's frames (a 4-byte length,
// then the frame) so that it can also lose or rewrite the answer to an
// EndTxn the broker has already applied: the one fault of the issue that
// kfake's own Fault cannot inject, as it answers EndTxn errors before the
// broker acts.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	open   chan struct{} // closed while traffic flows; replaced by a blackhole
	closed bool

	refusing atomic.Bool
	// afterApply is the number of EndTxn answers still to spoil, and
	// afterApplyCode what to answer instead (0: reset the connection).
	afterApply     atomic.Int64
	afterApplyCode atomic.Int32
	spoiled        atomic.Int64
}

type proxyConn struct {
	client, broker net.Conn
	mu             sync.Mutex
	endTxn         map[int32]int16 // correlation id -> request version
}

// NewProxy listens on addr (e.g. "127.0.0.1:0") and forwards every
// connection to target.
func NewProxy(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy listen on %s: %w", addr, err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}, open: make(chan struct{})}
	close(p.open)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial (the broker advertises it).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops the proxy and resets every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Reset()
	p.Blackhole(false)
}

// Reset drops every open connection with a TCP reset, as a crashed router
// or a killed connection tracker does. Clients reconnect at once.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// Refuse makes new connections fail with a reset while on: with Reset, a
// network that is down until Refuse(false).
func (p *Proxy) Refuse(on bool) { p.refusing.Store(on) }

// Blackhole stops forwarding while on, keeping every socket open: requests
// and answers wait (as in a partition TCP later heals) until clients time
// out and reconnect, and new connections connect but get nothing through.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		if on {
			p.open = make(chan struct{})
		}
	default:
		if !on {
			close(p.open)
		}
	}
}

// SpoilEndTxnAnswers makes the next n EndTxn answers from the broker
// reach the client as error code instead of their own (the broker has
// committed or aborted the transaction all the same); code 0 resets the
// connection instead, so the client never learns the outcome.
func (p *Proxy) SpoilEndTxnAnswers(n int, code int16) {
	p.afterApplyCode.Store(int32(code))
	p.afterApply.Store(int64(n))
}

// Spoiled is the number of EndTxn answers spoiled so far.
func (p *Proxy) Spoiled() int64 { return p.spoiled.Load() }

// PendingSpoils is the number of EndTxn answers still to spoil.
func (p *Proxy) PendingSpoils() int64 { return p.afterApply.Load() }

func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refusing.Load() {
			resetConn(c)
			continue
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	broker, err := net.Dial("tcp", p.target)
	if err != nil {
		resetConn(client)
		return
	}
	pc := &proxyConn{client: client, broker: broker, endTxn: map[int32]int16{}}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		pc.reset()
		return
	}
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.requests(pc); done <- struct{}{} }()
	go func() { p.responses(pc); done <- struct{}{} }()
	<-done
	pc.reset()
	<-done
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// requests forwards client frames to the broker, noting EndTxn requests.
func (p *Proxy) requests(pc *proxyConn) {
	r := bufio.NewReader(pc.client)
	for {
		frame, err := readFrame(r)
		if err != nil {
			return
		}
		if len(frame) >= 12 && int16(binary.BigEndian.Uint16(frame[4:])) == int16(kmsg.EndTxn) {
			version := int16(binary.BigEndian.Uint16(frame[6:]))
			corr := int32(binary.BigEndian.Uint32(frame[8:]))
			pc.mu.Lock()
			pc.endTxn[corr] = version
			pc.mu.Unlock()
		}
		<-p.gate()
		if _, err := pc.broker.Write(frame); err != nil {
			return
		}
	}
}

// responses forwards broker frames to the client, spoiling EndTxn answers
// when asked to.
func (p *Proxy) responses(pc *proxyConn) {
	r := bufio.NewReader(pc.broker)
	for {
		frame, err := readFrame(r)
		if err != nil {
			return
		}
		if len(frame) >= 8 {
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			pc.mu.Lock()
			version, isEnd := pc.endTxn[corr]
			delete(pc.endTxn, corr)
			pc.mu.Unlock()
			if isEnd && p.takeSpoil() {
				p.spoiled.Add(1)
				if !spoilEndTxn(frame, version, int16(p.afterApplyCode.Load())) {
					return // reset: the client never hears the outcome
				}
			}
		}
		<-p.gate()
		if _, err := pc.client.Write(frame); err != nil {
			return
		}
	}
}

func (p *Proxy) takeSpoil() bool {
	for {
		n := p.afterApply.Load()
		if n <= 0 {
			return false
		}
		if p.afterApply.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// spoilEndTxn sets the error code of an EndTxn response frame (length
// prefix included) to code; false if code is 0 or the frame's header
// carries tagged fields it does not parse.
func spoilEndTxn(frame []byte, version, code int16) bool {
	if code == 0 {
		return false
	}
	at := 8 // length, correlation id
	if version >= 3 {
		// Flexible versions: the response header ends with its tagged
		// fields, which brokers leave empty (one zero byte).
		if len(frame) <= at || frame[at] != 0 {
			return false
		}
		at++
	}
	at += 4 // throttle
	if len(frame) < at+2 {
		return false
	}
	binary.BigEndian.PutUint16(frame[at:], uint16(code))
	return true
}

// readFrame reads one length-prefixed Kafka frame, prefix included.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 256<<20 {
		return nil, errors.New("chaos: proxy: frame too large")
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

func (pc *proxyConn) reset() {
	resetConn(pc.client)
	resetConn(pc.broker)
}

// resetConn closes c with a TCP reset rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
