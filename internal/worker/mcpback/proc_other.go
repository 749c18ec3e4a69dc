//go:build !unix

package mcpback

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

func killGroup(int) {}
