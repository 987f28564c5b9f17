//go:build !linux

package main

import "syscall"

// childAttr: elsewhere a CMD outlives a killed chubbysh (no Pdeathsig).
func childAttr() *syscall.SysProcAttr { return nil }
