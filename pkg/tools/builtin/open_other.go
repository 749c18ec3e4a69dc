//go:build !unix

package builtin

// openNonblock is 0 where opens of pipes do not block.
const openNonblock = 0
