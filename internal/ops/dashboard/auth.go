package dashboard

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Authenticator decides who sends a request. Authenticate returns the
// user's name and true, or false when the request carries no valid
// credentials; Challenge is the WWW-Authenticate value of a 401.
type Authenticator interface {
	Authenticate(r *http.Request) (user string, ok bool)
	Challenge() string
}

// Tokens authenticates "Authorization: Bearer <token>" against a set of
// named tokens. Create it with LoadTokens or NewTokens.
type Tokens struct {
	tokens map[string][sha256.Size]byte // name -> SHA-256 of its token
}

// MinTokenLen is the shortest bearer token NewTokens accepts.
const MinTokenLen = 32

// NewTokens returns a Tokens for name -> token. Each token must be at
// least MinTokenLen characters (e.g. 32 random bytes, base64: openssl rand
// -base64 32).
func NewTokens(named map[string]string) (*Tokens, error) {
	if len(named) == 0 {
		return nil, errors.New("dashboard: no bearer token given")
	}
	t := &Tokens{tokens: map[string][sha256.Size]byte{}}
	for name, tok := range named {
		if len(tok) < MinTokenLen {
			return nil, fmt.Errorf("dashboard: the bearer token of %q has %d characters; use at least %d (e.g. openssl rand -base64 32)", name, len(tok), MinTokenLen)
		}
		t.tokens[name] = sha256.Sum256([]byte(tok))
	}
	return t, nil
}

// LoadTokens reads bearer tokens from a file: one per line, "NAME:TOKEN"
// (the name is who the audit log records) or a bare TOKEN (named
// "token"); blank lines and lines starting with '#' are skipped.
func LoadTokens(path string) (*Tokens, error) {
	named := map[string]string{}
	err := eachLine(path, func(n int, line string) error {
		name, tok, ok := strings.Cut(line, ":")
		if !ok {
			name, tok = "token", line
		}
		if name == "" || tok == "" {
			return fmt.Errorf(`%s:%d: want "NAME:TOKEN" or a bare TOKEN`, path, n)
		}
		if _, dup := named[name]; dup {
			return fmt.Errorf("%s:%d: a second token named %q; give each token its own name", path, n, name)
		}
		named[name] = tok
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(named) == 0 {
		return nil, fmt.Errorf("%s: no token in the file; add a line NAME:TOKEN", path)
	}
	t, err := NewTokens(named)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Authenticate implements Authenticator.
func (t *Tokens) Authenticate(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(tok))
	user, found := "", 0
	for name, want := range t.tokens {
		// Compare with every token, in constant time each.
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			user, found = name, 1
		}
	}
	return user, found == 1
}

// Challenge implements Authenticator.
func (t *Tokens) Challenge() string { return `Bearer realm="kjob"` }

// Users authenticates HTTP basic auth against users with bcrypt-hashed
// passwords. Create it with LoadUsers.
type Users struct {
	hashes map[string][]byte // user -> bcrypt hash

	// A bcrypt check costs tens of milliseconds by design; a page makes a
	// request every few seconds, so a verified user:password is
	// remembered (as its SHA-256) for verifiedFor.
	mu       sync.Mutex
	verified map[[sha256.Size]byte]time.Time
	// throttle bounds the bcrypt checks of failed logins (throttle.go).
	throttle *loginThrottle
}

// verifiedFor is how long a checked password is taken without bcrypt.
const verifiedFor = time.Minute

// LoadUsers reads users from a file of "USER:BCRYPT-HASH" lines, as
// `htpasswd -B -n USER` writes them; blank lines and lines starting with
// '#' are skipped. Hashes other than bcrypt ($2a$, $2b$, $2y$) are
// refused.
func LoadUsers(path string) (*Users, error) {
	u := &Users{hashes: map[string][]byte{}, verified: map[[sha256.Size]byte]time.Time{}, throttle: newLoginThrottle()}
	err := eachLine(path, func(n int, line string) error {
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return fmt.Errorf(`%s:%d: want "USER:BCRYPT-HASH" (htpasswd -B -n USER)`, path, n)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return fmt.Errorf("%s:%d: the password of %q is not a bcrypt hash (%v); make one with htpasswd -B -n %s", path, n, user, err, user)
		}
		if _, dup := u.hashes[user]; dup {
			return fmt.Errorf("%s:%d: user %q a second time", path, n, user)
		}
		u.hashes[user] = []byte(hash)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(u.hashes) == 0 {
		return nil, fmt.Errorf("%s: no user in the file; add a line USER:BCRYPT-HASH (htpasswd -B -n USER)", path)
	}
	return u, nil
}

// Authenticate implements Authenticator. A client throttled for failed
// logins (throttle.go) is refused without a check; the dashboard answers
// it 429 with Retry-After.
func (u *Users) Authenticate(r *http.Request) (string, bool) {
	user, ok, _ := u.authenticate(r)
	return user, ok
}

// authenticate is Authenticate, and when the password was not checked
// because the client is throttled, how long it should wait.
func (u *Users) authenticate(r *http.Request) (string, bool, time.Duration) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return "", false, 0
	}
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	now := time.Now()
	u.mu.Lock()
	until, seen := u.verified[key]
	u.mu.Unlock()
	if seen && now.Before(until) {
		return user, true, 0
	}
	if d := u.throttle.wait(r); d > 0 {
		return "", false, d
	}
	hash, known := u.hashes[user]
	if !known {
		// Spend as long as for a known user, so timing does not tell
		// which users exist.
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(pass))
		u.throttle.failed(r)
		return "", false, 0
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil {
		u.throttle.failed(r)
		return "", false, 0
	}
	u.mu.Lock()
	for k, t := range u.verified {
		if now.After(t) {
			delete(u.verified, k)
		}
	}
	u.verified[key] = now.Add(verifiedFor)
	u.mu.Unlock()
	return user, true, 0
}

// Challenge implements Authenticator.
func (u *Users) Challenge() string { return `Basic realm="kjob dashboard", charset="UTF-8"` }

// dummyHash is checked against for unknown users.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("kjob-dashboard-no-such-user"), bcrypt.DefaultCost)

// eachLine calls fn for each non-blank line of path that does not start
// with '#', trimmed, with its line number.
func eachLine(path string, fn func(n int, line string) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// anyAuth accepts a request any of its authenticators accepts.
type anyAuth []Authenticator

func (a anyAuth) Authenticate(r *http.Request) (string, bool) {
	for _, x := range a {
		if u, ok := x.Authenticate(r); ok {
			return u, true
		}
	}
	return "", false
}

func (a anyAuth) Challenge() string { return a[len(a)-1].Challenge() }
