package jobspec

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/contract"
)

// Kind is a job kind: the last token of the subject a spec is published to
// and the name of the spec's one section.
type Kind string

// The job kinds (docs/job-spec.md).
const (
	KindVideo   Kind = "video"
	KindSpeech  Kind = "speech"
	KindCompute Kind = "compute"
	// KindContainer is a script run in a container instance of the
	// compute platform.
	KindContainer Kind = "container"
	// KindPipeline is a graph of jobs of the other kinds
	// (docs/pipelines.md).
	KindPipeline Kind = "pipeline"
)

// ErrUnknownKind is returned (wrapped) by ParseKind and KindFromSubject for
// anything but video, speech, compute, container or pipeline.
var ErrUnknownKind = errors.New("jobspec: unknown kind")

// Kinds returns every kind in canonical order: video, speech, compute,
// container, pipeline.
func Kinds() []Kind { return []Kind{KindVideo, KindSpeech, KindCompute, KindContainer, KindPipeline} }

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	return k == KindVideo || k == KindSpeech || k == KindCompute || k == KindContainer || k == KindPipeline
}

// ParseKind returns the Kind named s, exactly as spelled (no case folding),
// or an error wrapping ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); k.Valid() {
		return k, nil
	}
	return "", fmt.Errorf("%w %s: want video, speech, compute, container or pipeline", ErrUnknownKind, quote(s))
}

// KindFromSubject returns the kind of a jobs subject: KindVideo for
// "sluice.jobs.video". It returns an error wrapping ErrUnknownKind when the
// subject is not sluice.jobs.<kind> or the kind is not one of Kinds.
func KindFromSubject(subject string) (Kind, error) {
	token, err := contract.KindOfSubject(subject)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnknownKind, err)
	}
	return ParseKind(token)
}
