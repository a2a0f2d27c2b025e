package apiclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// MaxResponseBytes bounds every JSON response body read by the clients.
// Artifact downloads are streams and are not subject to it.
const MaxResponseBytes = 8 << 20

// ErrResponseTooLarge is returned when a JSON response exceeds
// MaxResponseBytes.
var ErrResponseTooLarge = errors.New("apiclient: response body too large")

// readBody reads at most MaxResponseBytes of resp's body and always drains
// and closes it, so the connection can be reused.
func readBody(resp *http.Response) ([]byte, error) {
	defer backoff.DrainClose(resp.Body)
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(b) > MaxResponseBytes {
		return nil, ErrResponseTooLarge
	}
	return b, nil
}
