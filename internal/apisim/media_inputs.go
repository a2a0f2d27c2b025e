package apisim

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/mediaprobe"
)

// inputTimeout bounds the fetches of one submit's media inputs.
const inputTimeout = 30 * time.Second

// checkInputs fetches every media input of a structurally valid video
// request and checks it against the input media limits of media-api.md
// 2.4 and 8, as upstream does at submit: the first input that cannot be
// fetched or breaks a limit is a parameter error naming it. Inputs are
// read by range (package mediaprobe, as the worker's preflight does); an
// http(s) URL may point at a private address, the simulator being a test
// tool. s3:// addresses are refused: upstream cannot read them.
func (m *Media) checkInputs(ctx context.Context, b *videoBody) *paramError {
	if m.cfg.SkipInputChecks {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, inputTimeout)
	defer cancel()
	type input struct {
		field, url string
		kind       mediaprobe.Kind
	}
	var inputs []input
	for i, u := range b.Input.Images {
		inputs = append(inputs, input{fmt.Sprintf("input.images[%d]", i), *u, mediaprobe.KindImage})
	}
	for i, md := range b.Input.Media {
		kind := mediaprobe.KindImage
		switch *md.Type {
		case "reference_video":
			kind = mediaprobe.KindVideo
		case "reference_audio":
			kind = mediaprobe.KindAudio
		}
		inputs = append(inputs, input{fmt.Sprintf("input.media[%d].url", i), *md.URL, kind})
	}
	var totals mediaprobe.Totals
	for _, in := range inputs {
		r, size, err := m.openInput(ctx, in.url)
		if err != nil {
			return badParam(in.field, "cannot fetch the %s: %v", in.kind, err)
		}
		info, err := mediaprobe.Inspect(r, size, in.kind)
		var le *mediaprobe.LimitError
		switch {
		case errors.As(err, &le):
			return badParam(in.field, "%s", le.Message)
		case err != nil:
			return badParam(in.field, "cannot fetch the %s: %v", in.kind, err)
		}
		totals.Add(in.kind, info)
	}
	if le := totals.Check(); le != nil {
		return badParam("input.media", "%s", le.Message)
	}
	return nil
}

// openInput opens a media address: a base64 data URI or an http(s) URL.
func (m *Media) openInput(ctx context.Context, u string) (io.ReaderAt, int64, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, payload, ok := strings.Cut(rest, ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return nil, 0, errors.New("a data URI must be data:<mime>;base64,<payload>")
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return nil, 0, errors.New("the data URI's payload is not base64")
		}
		return bytes.NewReader(b), int64(len(b)), nil
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, 0, errors.New("the address must be an http(s) URL or a base64 data URI")
	}
	r, err := m.fetcher.OpenRange(ctx, u)
	if err != nil {
		return nil, 0, err
	}
	return r, r.Size(), nil
}
