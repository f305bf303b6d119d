package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if err := run([]string{srv.URL + "/readyz"}); err != nil {
		t.Fatalf("ready endpoint: %v", err)
	}
	if err := run([]string{srv.URL + "/other"}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503: got %v", err)
	}
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "one URL") || !errors.Is(err, errUsage) {
		t.Fatalf("no args: got %v", err)
	}
	if err := run([]string{"--version"}); err != nil {
		t.Fatalf("--version: %v", err)
	}
}
