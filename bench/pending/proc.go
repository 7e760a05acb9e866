package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// duMiB returns the disk usage of dir in MiB, as du -sk reports it.
func duMiB(ctx context.Context, dir string) (float64, error) {
	out, err := exec.CommandContext(ctx, "du", "-sk", dir).Output()
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", dir, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("du %s: empty output", dir)
	}
	kb, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("du %s: parse %q: %w", dir, f[0], err)
	}
	return kb / 1024, nil
}
