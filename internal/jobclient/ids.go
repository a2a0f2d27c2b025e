package jobclient

import (
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// idTimeLayout is the time part of a generated id: UTC, to the second, with
// no character the id pattern forbids.
const idTimeLayout = "20060102T150405Z"

// NewID returns a job id made of kind, the time t and 64 random bits from
// r, for example "video-20261122T100005Z-9f86d081e2a4c3b1". It matches the
// contract's id pattern for every kind name of the contract.
func NewID(kind string, t time.Time, r io.Reader) (string, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("generate job id: %w", err)
	}
	return kind + "-" + t.UTC().Format(idTimeLayout) + "-" + hex.EncodeToString(b[:]), nil
}
