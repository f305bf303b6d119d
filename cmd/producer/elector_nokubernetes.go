//go:build nokubernetes

package main

import (
	"errors"
	"log/slog"
	"time"

	"github.com/kjob/kjob"
)

// kubeElector: this binary was built without the Kubernetes Lease backend.
func kubeElector(string, string, string, string, time.Duration, time.Duration, *slog.Logger) (kjob.Elector, error) {
	return nil, errors.New("--lease-backend kubernetes: this producer was built with -tags nokubernetes, without the Kubernetes Lease backend; use a default build (make build) or --lease-backend redis")
}

// kubeFlags is empty: there is no Kubernetes elector to name fields of.
var kubeFlags map[string]string
