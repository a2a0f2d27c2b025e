package cli

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runVideo(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("video")
	var (
		sf                               specFlags
		pf                               publishFlags
		model, prompt, resolution, ratio string
		firstFrame, lastFrame            string
		duration                         int
		refImages, refVideos, refAudios  listFlag
		watermark                        optBool
	)
	fs.StringVar(&model, "model", "", "video model name (required)")
	fs.StringVar(&prompt, "prompt", "", "text prompt, at most 7000 characters (required)")
	fs.StringVar(&resolution, "resolution", "", "one the model takes, any case (required; shipped catalog: 768P, 2K, 720p, 1080p)")
	fs.IntVar(&duration, "duration", 0, "length in seconds, in the model's range (required; shipped catalog: 4 to 15)")
	fs.StringVar(&ratio, "ratio", "", "one the model takes (shipped catalog: adaptive, 21:9, 16:9, 4:3, 1:1, 3:4, 9:16); required for text-to-video, not adaptive")
	fs.StringVar(&firstFrame, "first-frame", "", "first frame image `URL` (https://, s3://bucket/key, a data: URI, or a local file to upload)")
	fs.StringVar(&lastFrame, "last-frame", "", "last frame image `URL` or local file")
	fs.Var(&refImages, "ref-image", "reference image `URL` or local file (repeatable, at most 9)")
	fs.Var(&refVideos, "ref-video", "reference video `URL` or local file (repeatable, at most 3)")
	fs.Var(&refAudios, "ref-audio", "reference audio `URL` or local file (repeatable, at most 3)")
	fs.Var(&watermark, "watermark", "add an AIGC watermark (default: upstream's default, none)")
	sf.register(fs)
	pf.register(fs, false)
	h := help{
		usage: "enqueue video --model M --prompt TEXT --resolution R --duration SECONDS [--ratio R] [media flags] [flags]",
		about: `Publish one video job. Without media flags it is text-to-video (--ratio
required, not adaptive); --first-frame/--last-frame make it image-to-video;
--ref-image/--ref-video/--ref-audio make it a multimodal reference job. The
two groups cannot be mixed.

The resolutions, durations, ratios and input kinds a model takes are the
model catalog's: the one the workers published (enqueue models); with
--dry-run, before any worker has published one or with NATS unreachable,
the shipped one, or SLUICE_MEDIA_MODELS in enqueue's environment loaded
over it. A model the catalog does not name is checked against its default
entry, with a warning; the resolution is sent as the catalog spells it.

A media flag may name a local file: enqueue checks it against the media
API's input limits at once (a bad file is an error naming its flag, and
nothing is published), uploads it to the worker's bucket under
<SLUICE_S3_PREFIX>/inputs/sha256/<sha256><ext> (SLUICE_S3_BUCKET,
SLUICE_S3_ENDPOINT, SLUICE_S3_REGION, SLUICE_S3_PATH_STYLE and the AWS
credentials, as the worker reads them) unless those bytes are there
already, and publishes the s3:// URL.` + "\n" + publishAbout,
		examples: `  enqueue video --model M --prompt "a paper boat drifting down a rain gutter" \
      --resolution 768P --duration 5 --ratio 16:9 --id clip-0001 --label campaign=spring --wait
  enqueue video --model Seedance2.0 --prompt "a lighthouse at dusk" --resolution 720p \
      --duration 5 --ratio 16:9
  enqueue video --model M --prompt "the boat sails off" --resolution 2K --duration 8 \
      --first-frame s3://media/boat.png --prefix spring/clips
  enqueue video --model M --prompt "dance" --resolution 768P --duration 10 \
      --ref-image https://example.test/a.png --ref-video https://example.test/b.mp4 --json
  enqueue video --model M --prompt "the boat sails off" --resolution 768P --duration 5 \
      --first-frame ./boat.png --last-frame ./harbour.jpg --wait`,
		exits: true,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("video", rest); err != nil {
		return err
	}
	spec := &jobspec.Spec{Kind: jobspec.KindVideo, Video: &jobspec.Video{
		Model: model,
		Input: jobspec.VideoInput{Prompt: prompt},
		Parameters: jobspec.VideoParameters{
			Resolution: resolution, Duration: duration, Ratio: ratio, Watermark: watermark.ptr(),
		},
	}}
	sf.apply(spec)
	names := flagNames{
		"video":                       "--model",
		"video.model":                 "--model",
		"video.input":                 "--prompt",
		"video.input.prompt":          "--prompt",
		"video.input.media":           "--first-frame/--last-frame/--ref-image/--ref-video/--ref-audio",
		"video.parameters.resolution": "--resolution",
		"video.parameters.duration":   "--duration",
		"video.parameters.ratio":      "--ratio",
		"video.parameters.watermark":  "--watermark",
	}
	addMedia := func(role, flagName string, urls ...string) {
		for _, u := range urls {
			if u == "" {
				continue
			}
			names[fmt.Sprintf("video.input.media[%d]", len(spec.Video.Input.Media))] = flagName
			spec.Video.Input.Media = append(spec.Video.Input.Media, jobspec.Media{Type: role, URL: u})
		}
	}
	addMedia(apiclient.RoleFirstFrame, "--first-frame", firstFrame)
	addMedia(apiclient.RoleLastFrame, "--last-frame", lastFrame)
	addMedia(apiclient.RoleReferenceImage, "--ref-image", refImages...)
	addMedia(apiclient.RoleReferenceVideo, "--ref-video", refVideos...)
	addMedia(apiclient.RoleReferenceAudio, "--ref-audio", refAudios...)
	if err := pf.check(); err != nil {
		return err
	}
	if err := a.uploadLocalMedia(ctx, spec, names, &pf); err != nil {
		return err
	}
	return a.runBuilt(ctx, spec, names, &pf)
}
