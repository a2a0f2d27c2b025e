package jobspec_test

import (
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

func ExampleDecode() {
	data := []byte(`{
		"id": "clip-0001",
		"kind": "video",
		"video": {
			"model": "video-model-name",
			"input": {"prompt": "a paper boat", "media": [{"type": "first_frame", "url": "s3://media-in/boat.png"}]},
			"parameters": {"resolution": "768P", "duration": 5}
		}
	}`)
	spec, err := jobspec.Decode(data, jobspec.KindVideo)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := spec.Video.Request()
	fmt.Println(spec.ID, spec.Video.Scenario(), req.Input.Media[0].URL)
	// Output: clip-0001 image_to_video s3://media-in/boat.png
}

func ExampleError() {
	data := []byte(`{
		"id": "clip-0002",
		"kind": "video",
		"video": {
			"model": "video-model-name",
			"input": {"prompt": "a paper boat", "media": [
				{"type": "first_frame", "url": "https://example.test/f.png"},
				{"type": "reference_image", "url": "https://example.test/r.png"}
			]},
			"parameters": {"resolution": "4K", "duration": 5.5}
		}
	}`)
	spec, err := jobspec.Decode(data, jobspec.KindVideo)
	var se *jobspec.Error
	if errors.As(err, &se) {
		fmt.Println("job", spec.ID)
		for _, p := range se.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// job clip-0002
	// video.parameters.duration: must be an integer number of seconds
	// video.input.media[1]: role reference_image cannot be combined with first_frame
	// video.parameters.resolution: must be one of 768P, 2K, 720p, 1080p, got "4K"
}
