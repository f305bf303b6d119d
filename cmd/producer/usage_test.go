package main

import (
	"testing"

	"github.com/kjob/kjob/cmd/internal/daemontest"
)

// TestMain lets a test run this binary's main (daemontest.RunMain).
func TestMain(m *testing.M) { daemontest.Main(m, main) }

// Stray words, unknown flags and values that do not parse exit 2 in one
// line; --help and --version exit 0.
func TestCommandLineMistakesExit2(t *testing.T) { daemontest.CommandLineMistakesExit2(t, "producer") }
