package operator

import (
	"math"
	"sync"
	"time"
)

// Password attempts per client address (Limiter): a burst of LoginBurst
// attempts, then one every LoginEvery. Guessing a password from one address
// then takes LoginEvery per guess (an attack on an earlier build made 406
// guesses a second); the teacher who mistypes it a few times waits at most
// LoginEvery. Only presented passwords count: the session cookie (an HMAC
// keyed by the password's hash) is never limited, so a classroom guessing
// behind the teacher's NAT cannot log the teacher's open session out.
const (
	LoginBurst = 5
	LoginEvery = 10 * time.Second
	// maxLimited bounds the addresses tracked; beyond it (after dropping
	// the ones whose bucket is full again) a new address is refused until
	// an old one refills.
	maxLimited = 1 << 16
)

// Limiter is a token bucket per client address: burst attempts, refilled
// one per every. It is safe for concurrent use.
type Limiter struct {
	mu     sync.Mutex
	burst  float64
	every  time.Duration
	now    func() time.Time
	byAddr map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewLimiter returns a limiter of burst attempts per address, refilled one
// per every.
func NewLimiter(burst int, every time.Duration) *Limiter {
	return &Limiter{burst: float64(burst), every: every, now: time.Now, byAddr: map[string]*bucket{}}
}

// refill brings b's tokens up to now; the caller holds mu.
func (l *Limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(l.burst, b.tokens+float64(d)/float64(l.every))
		b.at = now
	}
}

// Take spends one attempt of addr. It reports whether the attempt may go
// on and, if not, how long until the next one may.
func (l *Limiter) Take(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.byAddr[addr]
	if !ok {
		if len(l.byAddr) >= maxLimited {
			for a, o := range l.byAddr {
				if l.refill(o, now); o.tokens >= l.burst {
					delete(l.byAddr, a)
				}
			}
		}
		if len(l.byAddr) >= maxLimited {
			return false, l.every
		}
		b = &bucket{tokens: l.burst, at: now}
		l.byAddr[addr] = b
	}
	l.refill(b, now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(l.every))
	}
	b.tokens--
	return true, 0
}

// Reset forgets addr (after a right password: the operator's own mistypes
// do not count against the next login).
func (l *Limiter) Reset(addr string) {
	l.mu.Lock()
	delete(l.byAddr, addr)
	l.mu.Unlock()
}
