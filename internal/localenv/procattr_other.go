//go:build !linux

package localenv

import "syscall"

// ChildProcAttr is nil where the parent's death cannot be signalled to a child: components are stopped on exit
// only.
func ChildProcAttr() *syscall.SysProcAttr { return nil }
