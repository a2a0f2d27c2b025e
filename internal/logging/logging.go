// Package logging builds the zerolog logger the binaries use.
package logging

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// New returns a logger writing to w (JSON, or a human console format) at
// level; an unknown level means info.
func New(w io.Writer, format, level string) zerolog.Logger {
	if w == nil {
		w = os.Stderr
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
