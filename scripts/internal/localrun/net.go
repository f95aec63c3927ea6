package localrun

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// Tail keeps the last max bytes written to it (a process's output, to
// quote when it exits): NewTail.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// NewTail returns a Tail of max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// String is the kept output from its first whole line, or "(no output)".
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) == t.max {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return "(no output)"
	}
	return s
}

// ErrNoLAN is returned by LANAddress when no interface has a usable
// address.
var ErrNoLAN = errors.New("no network interface with a private IPv4 address is up (connect to the classroom's Wi-Fi, or give the address with -host)")

// LANAddress picks the address phones on the same network can reach this
// computer at: the first private IPv4 address (10/8, 172.16/12,
// 192.168/16) of an interface that is up and not loopback, else the first
// other non-loopback, non-link-local IPv4 address. It only reads the
// interface list; it sends nothing.
func LANAddress() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("localrun: network interfaces: %w", err)
	}
	var other string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip := ipn.IP.To4()
			if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
				continue
			}
			if ip.IsPrivate() {
				return ip.String(), nil
			}
			if other == "" {
				other = ip.String()
			}
		}
	}
	if other != "" {
		return other, nil
	}
	return "", ErrNoLAN
}
