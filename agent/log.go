package agent

import (
	"io"
	"log/slog"
)

// NewLogger returns the logger Config.Log asks for (JSON by default).
func NewLogger(c LogConfig, w io.Writer) *slog.Logger {
	var lv slog.Level
	switch c.Level {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	o := &slog.HandlerOptions{Level: lv}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, o))
	}
	return slog.New(slog.NewJSONHandler(w, o))
}
