package dashboard

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed logins are throttled: a password that is not remembered as
// verified costs a bcrypt check (about 80 ms of CPU), so unthrottled
// guesses would both brute-force passwords and burn the process's CPU.
// Each client (the remote IP, as the server sees it: behind a proxy that
// is the proxy) may fail LoginBurstPerClient times at once, then once per
// LoginIntervalPerClient; all clients together may fail LoginBurst times
// at once, then LoginRate per second, which bounds the CPU guesses take
// (5 per second: about 0.4 of a core) however many addresses send them.
// A throttled request is answered 429 with Retry-After, without a bcrypt
// check. Bearer tokens and passwords already verified are not throttled.
const (
	LoginBurstPerClient    = 5
	LoginIntervalPerClient = 2 * time.Second
	LoginBurst             = 20
	LoginRate              = 5
)

// maxThrottledClients bounds the per-client table; beyond it, clients
// whose allowance is whole again are forgotten.
const maxThrottledClients = 10_000

// loginThrottle counts failed password checks per client and overall.
type loginThrottle struct {
	mu      sync.Mutex
	global  *rate.Limiter
	clients map[string]*rate.Limiter
	now     func() time.Time
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{global: rate.NewLimiter(LoginRate, LoginBurst), clients: map[string]*rate.Limiter{}, now: time.Now}
}

// clientKey is the key of r's sender: its remote IP.
func clientKey(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// wait is how long r's client must wait before its password may be
// checked, or 0 when it may be checked now.
func (t *loginThrottle) wait(r *http.Request) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	d := untilToken(t.global, now)
	if l, ok := t.clients[clientKey(r)]; ok {
		d = max(d, untilToken(l, now))
	}
	return d
}

// failed records a failed password check of r's client.
func (t *loginThrottle) failed(r *http.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.global.AllowN(now, 1)
	c := clientKey(r)
	l, ok := t.clients[c]
	if !ok {
		if len(t.clients) >= maxThrottledClients {
			for k, x := range t.clients {
				if x.TokensAt(now) >= LoginBurstPerClient {
					delete(t.clients, k)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(LoginIntervalPerClient), LoginBurstPerClient)
		t.clients[c] = l
	}
	l.AllowN(now, 1)
}

// untilToken is how long until l has a whole token.
func untilToken(l *rate.Limiter, now time.Time) time.Duration {
	tokens := l.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) / float64(l.Limit()) * float64(time.Second)))
}
