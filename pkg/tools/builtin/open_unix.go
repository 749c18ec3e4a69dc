//go:build unix

package builtin

import "syscall"

// openNonblock keeps an open of a named pipe from blocking until a writer
// comes; it changes nothing for regular files.
const openNonblock = syscall.O_NONBLOCK
