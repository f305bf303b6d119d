package main

import "syscall"

// childAttr puts a demo child in its own process group, so Ctrl-C reaches
// only kjobctl, which stops the children in order; and has the kernel send
// it SIGTERM if kjobctl dies without doing so (SIGKILL, a crash), so no
// broker, redis-server, producer or worker is left behind.
//
// Pdeathsig fires when the OS thread that started the child exits; Go
// keeps its threads for the life of the process unless a goroutine exits
// while locked to one, which kjobctl never does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
