package localenv

import "syscall"

// ChildProcAttr makes a started component die with the process that started it, even when that one is killed.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
