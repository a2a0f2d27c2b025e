package cli

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/mediaprobe"
)

// isLocalPath reports whether a media flag's value names a local file
// rather than an address the worker fetches.
func isLocalPath(u string) bool {
	for _, p := range []string{"https://", "http://", "s3://", "data:"} {
		if strings.HasPrefix(u, p) {
			return false
		}
	}
	return u != ""
}

// localFile is a local media file checked and ready to upload.
type localFile struct {
	in   jobspec.MediaInput
	flag string
	path string
	info mediaprobe.Info
	sum  string
}

// uploadLocalMedia handles the media flags that name local files: it
// probes each with the worker's own checks (a bad file is an immediate
// error naming its flag, and nothing is published), uploads it to S3
// under <SLUICE_S3_PREFIX>/inputs/sha256/<sha256><ext> unless an object
// with those bytes is there already, and puts its s3:// URL in the spec.
// With --dry-run it checks the files and shows the URLs without uploading.
func (a *app) uploadLocalMedia(ctx context.Context, spec *jobspec.Spec, names flagNames, pf *publishFlags) error {
	var files []localFile
	var totals mediaprobe.Totals
	for _, in := range spec.Video.Inputs() {
		if !isLocalPath(in.URL) {
			continue
		}
		f := localFile{in: in, flag: names.flagFor(in.Field), path: in.URL}
		if err := f.check(); err != nil {
			return usageErrorf("%s %s: %v", f.flag, f.path, err)
		}
		totals.Add(mediaprobe.Kind(in.Kind), f.info)
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil
	}
	if le := totals.Check(); le != nil {
		return usageErrorf("local media files: %s", le.Message)
	}
	// Nothing is uploaded for a job that cannot be published.
	probe := *spec.Video
	probe.Input.Images = slices.Clone(spec.Video.Input.Images)
	probe.Input.Media = slices.Clone(spec.Video.Input.Media)
	for _, f := range files {
		setMediaURL(&probe, f.in.Field, "s3://bucket/local-file")
	}
	check := *spec
	check.Video = &probe
	if _, err := a.submission(ctx, &check, names, pf, nil); err != nil {
		return err
	}
	store, err := a.inputStore(ctx)
	if err != nil {
		return err
	}
	for _, f := range files {
		url, err := a.upload(ctx, store, f.object(), pf)
		if err != nil {
			return fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
		setMediaURL(spec.Video, f.in.Field, url)
	}
	return nil
}

// check probes the file and reads its sha256.
func (f *localFile) check() error {
	fh, err := os.Open(f.path)
	if err != nil {
		return errors.Unwrap(err) // "no such file or directory", without repeating the path
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	info, err := mediaprobe.Inspect(fh, st.Size(), mediaprobe.Kind(f.in.Kind))
	if err != nil {
		return err
	}
	f.info = info
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(fh, 0, st.Size())); err != nil {
		return err
	}
	f.sum = hex.EncodeToString(h.Sum(nil))
	return nil
}

// inputObject is a checked local file to store by its content.
type inputObject struct {
	flag, path       string
	sum              string
	size, maxBytes   int64
	ext, contentType string
}

// object is f as the input object it is stored as.
func (f localFile) object() inputObject {
	return inputObject{
		flag: f.flag, path: f.path, sum: f.sum, size: f.info.Size, maxBytes: mediaprobe.MaxBytes(mediaprobe.Kind(f.in.Kind)),
		ext: f.info.Format.Ext(), contentType: f.info.Format.MediaType(),
	}
}

// upload stores o (or finds it stored) and returns its s3:// URL.
func (a *app) upload(ctx context.Context, store *artifacts.Store, o inputObject, pf *publishFlags) (string, error) {
	if pf.dryRun {
		key, err := store.InputKey(o.sum, o.ext)
		return "s3://" + store.Bucket() + "/" + key, err
	}
	fh, err := os.Open(o.path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	b := a.newByteBar(pf.conn.json, o.size, "uploading "+filepath.Base(o.path))
	art, uploaded, err := store.PutInput(ctx, b.reader(fh), o.sum, o.ext, o.contentType, "file:"+filepath.Base(o.path), o.maxBytes)
	b.done()
	if err != nil {
		return "", err
	}
	if !pf.conn.json {
		verb := "uploaded"
		if !uploaded {
			verb = "already in S3, not uploaded again:"
		}
		fmt.Fprintf(a.env.Stderr, "%s %s (%d bytes) %s %s\n", o.flag, o.path, art.Size, verb, art.URL)
	}
	return art.URL, nil
}

// setMediaURL replaces the address at field (as jobspec.Video.Inputs
// names it).
func setMediaURL(v *jobspec.Video, field, url string) {
	for i := range v.Input.Images {
		if field == fmt.Sprintf("video.input.images[%d]", i) {
			v.Input.Images[i] = url
		}
	}
	for i := range v.Input.Media {
		if field == fmt.Sprintf("video.input.media[%d].url", i) {
			v.Input.Media[i].URL = url
		}
	}
}

// inputStore opens the S3 store local files go to, configured by the
// worker's SLUICE_S3_* variables; credentials come from the AWS chain.
func (a *app) inputStore(ctx context.Context) (*artifacts.Store, error) {
	env := a.env.Getenv
	bucket := env("SLUICE_S3_BUCKET")
	if bucket == "" {
		return nil, usageErrorf("local files are uploaded to S3: set SLUICE_S3_BUCKET (and SLUICE_S3_ENDPOINT, SLUICE_S3_PATH_STYLE for a self-hosted store), or give URLs")
	}
	pathStyle := false
	if v := env("SLUICE_S3_PATH_STYLE"); v != "" {
		var err error
		if pathStyle, err = strconv.ParseBool(v); err != nil {
			return nil, usageErrorf("SLUICE_S3_PATH_STYLE: cannot parse %q as a boolean", v)
		}
	}
	client, err := artifacts.NewS3Client(ctx, artifacts.S3Config{
		Endpoint: env("SLUICE_S3_ENDPOINT"), Region: cmp.Or(env("SLUICE_S3_REGION"), "us-east-1"), PathStyle: pathStyle,
		// The AWS chain reads these from the process environment too; read
		// through Env they are the same values, and tests can set them.
		AccessKeyID: env("AWS_ACCESS_KEY_ID"), SecretAccessKey: env("AWS_SECRET_ACCESS_KEY"),
	})
	if err != nil {
		return nil, usageErrorf("S3 for local files: %v", err)
	}
	return artifacts.NewStore(artifacts.StoreConfig{Client: client, Bucket: bucket, Prefix: cmp.Or(env("SLUICE_S3_PREFIX"), "sluice")})
}
