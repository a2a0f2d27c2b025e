package artifacts_test

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/artifacts"
)

func ExampleStore_Key() {
	store, err := artifacts.NewStore(artifacts.StoreConfig{
		Client: s3.New(s3.Options{Region: "us-east-1"}),
		Bucket: "media",
		Prefix: "sluice",
	})
	if err != nil {
		panic(err)
	}
	key, _ := store.Key("spring/clips", "video", "clip-0001", "result-0.mp4")
	fmt.Println(key)
	// An upstream-derived name is reduced to a safe base name.
	key, _ = store.Key("", "compute", "job-7", "/work/run 1/../out?.log")
	fmt.Println(key)
	_, err = store.Key("../escape", "video", "clip-0001", "result-0.mp4")
	fmt.Println(err)
	// Output:
	// sluice/spring/clips/video/clip-0001/result-0.mp4
	// sluice/compute/job-7/out_.log
	// artifacts: invalid argument: output.prefix: "../escape" has a .. segment
}

func ExampleContentType() {
	fmt.Println(artifacts.ContentType("application/octet-stream", "result-0.mp4"))
	fmt.Println(artifacts.ContentType("audio/mpeg", "speech.bin"))
	fmt.Println(artifacts.ContentType("", "job.err"))
	// Output:
	// video/mp4
	// audio/mpeg
	// text/plain
}
