//go:build !linux

package main

import "syscall"

// dieWithParent is nil where a child cannot be tied to its parent's end
// (the bench needs Linux's /proc anyway).
func dieWithParent() *syscall.SysProcAttr { return nil }
