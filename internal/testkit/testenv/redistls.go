package testenv

import (
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewRedisTLS starts a redis-server that accepts only TLS connections with
// a client certificate signed by certs' CA (no plain port), with the ACL
// users given as "ACL SETUSER" argument lines (e.g. "app on >pw ~app:* +get")
// and the default user disabled. It returns the address. Without
// redis-server it skips the test, or fails it when KJOB_TEST_REQUIRE_REDIS=1
// (as CI sets): there is no TLS fallback.
func NewRedisTLS(tb testing.TB, certs *Certs, users ...string) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("KJOB_TEST_REQUIRE_REDIS") == "1" {
			tb.Fatalf("testenv: redis-server is not on PATH; install it (apt-get install -y redis-server)")
		}
		tb.Skip("testenv: redis-server is not on PATH; the Redis TLS/ACL test needs a real server (apt-get install -y redis-server)")
	}
	dir := tb.TempDir()
	port := FreePort(tb)
	acl := "user default off\n"
	for _, u := range users {
		acl += "user " + u + "\n"
	}
	aclFile := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		tb.Fatal(err)
	}
	logFile := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CA,
		"--tls-auth-clients", "yes", "--aclfile", aclFile,
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", logFile)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testenv: start redis-server: %v", err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// Wait until the TLS port completes a handshake (the server answers
	// NOAUTH/WRONGPASS to an anonymous PING, which proves it is up).
	cert, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, TLSConfig: &tls.Config{RootCAs: certs.Pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"}})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil || strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOPERM") {
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			tb.Fatalf("testenv: TLS redis-server on %s did not answer within 10s: %v\n%s", addr, err, log)
		}
		time.Sleep(20 * time.Millisecond) // poll interval while the process boots
	}
}
