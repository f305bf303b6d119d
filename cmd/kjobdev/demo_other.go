//go:build !linux

package main

import "syscall"

// childAttr puts a demo child in its own process group, so Ctrl-C reaches
// only kjobctl, which stops the children in order. (Only Linux can also
// have the children signalled if kjobctl is killed: see demo_linux.go.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
