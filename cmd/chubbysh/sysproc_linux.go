package main

import "syscall"

// childAttr makes a CMD run under a lock or a leadership die with
// chubbysh: killed (SIGKILL) the moment chubbysh is, so it cannot act on
// a lock that its holder's death lets move on.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
