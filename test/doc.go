// Package test holds kjob's multi-process tests: they build the binaries
// once, run the embedded broker, a real redis-server, producers and workers
// as separate processes, and check the guarantee from the outside through a
// ledger (an HTTP server the workers' http handler calls).
package test
