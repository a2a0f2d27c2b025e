package artifacts

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/redact"
)

// S3Config says which S3-compatible service to talk to. Credentials come
// from the standard AWS chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY,
// profiles, roles) unless a static pair is given.
type S3Config struct {
	// Endpoint is the URL of an S3-compatible service (MinIO, versitygw,
	// the embedded dev store). Defaults to AWS's regional endpoint.
	Endpoint string
	// Region is the signing region. Defaults to us-east-1.
	Region string
	// PathStyle addresses buckets as https://host/bucket instead of
	// https://bucket.host, as most self-hosted stores need. Defaults to
	// false.
	PathStyle bool
	// AccessKeyID and SecretAccessKey, when both set, replace the standard
	// credential chain (the embedded dev store uses them). Default to
	// empty.
	AccessKeyID     string
	SecretAccessKey string
	// HTTPClient sends the requests. Defaults to the SDK's client.
	HTTPClient *http.Client
	// WrapTransport, when set, wraps the transport every request goes
	// through last, after signing (the worker's tracing puts a span
	// around each request with it). Defaults to none.
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// validate checks the fields; errors wrap ErrInvalidArgument and name the
// field.
func (c S3Config) validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalidf("Endpoint", "%q is not an http(s) URL", redact.URL(c.Endpoint))
		}
		if u.User != nil || u.RawQuery != "" {
			return invalidf("Endpoint", "must not carry userinfo or a query")
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return invalidf("AccessKeyID", "set both AccessKeyID and SecretAccessKey, or neither")
	}
	return nil
}

// maxIdleS3Conns is how many idle connections to one S3 host a client
// keeps: more than the small and large copies a Store runs at once
// (StoreConfig's small slots and MaxUploads at their defaults, 16 and 4).
const maxIdleS3Conns = 64

// s3WriteBufferSize is the send buffer of every S3 connection. net/http's
// default is 4 KiB; with 128 KiB, and the body handed over whole
// (wholeBodies), a PUT of up to about that much (a typical speech file,
// the 64 KiB of the bench's jobs) leaves in one write and allocates
// nothing, and a larger one in 128 KiB writes. It costs 128 KiB per open
// connection (BENCHMARKS.md, "The cost of a job").
const s3WriteBufferSize = 128 << 10

// NewS3Client returns an S3 client for cfg. It fails when cfg is invalid
// (ErrInvalidArgument) or the AWS configuration cannot be loaded; it does
// not contact the service.
func NewS3Client(ctx context.Context, cfg S3Config) (*s3.Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(cmp.Or(cfg.Region, "us-east-1")),
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	} else {
		// The SDK's client keeps 10 idle connections per host: with more
		// copies than that at once against one store, every copy past the
		// tenth dialed a new connection and closed it after its PUT.
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = maxIdleS3Conns
			t.WriteBufferSize = s3WriteBufferSize
		})))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("artifacts: load AWS configuration: %w", err)
	}
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// After the configuration is loaded, which may have given the
		// client AWS_CA_BUNDLE's roots through its transport options.
		if cfg.WrapTransport != nil {
			o.HTTPClient = transportClient{cfg.WrapTransport(clientTransport{o.HTTPClient})}
		}
		o.HTTPClient = wholeBodies{o.HTTPClient}
		o.EndpointResolverV2 = newCachedResolver(cmp.Or(o.EndpointResolverV2, s3.NewDefaultEndpointResolverV2()))
		// Stores that send no checksums (gofakes3, some gateways) would
		// otherwise print a debug line for every download.
		o.DisableLogOutputChecksumValidationSkipped = true
	}), nil
}

// clientTransport is an SDK HTTP client as a RoundTripper, and
// transportClient a RoundTripper as an SDK HTTP client: S3Config's
// WrapTransport goes between them.
type clientTransport struct{ c aws.HTTPClient }

func (t clientTransport) RoundTrip(req *http.Request) (*http.Response, error) { return t.c.Do(req) }

type transportClient struct{ rt http.RoundTripper }

func (c transportClient) Do(req *http.Request) (*http.Response, error) { return c.rt.RoundTrip(req) }

// wholeBodyKey is the context key under which putSmall hands its PUT's
// body to wholeBodies.
type wholeBodyKey struct{}

// withWholeBody returns ctx carrying b, the whole body of the PUT that is
// sent with it.
func withWholeBody(ctx context.Context, b []byte) context.Context {
	return context.WithValue(ctx, wholeBodyKey{}, b)
}

// wholeBodies is every S3 client's HTTP client. net/http sends a request's
// headers in a write of their own, then its body through a 32 KiB buffer
// allocated per request, unless the body is one it knows to be in memory
// (a *bytes.Reader, say); the SDK wraps every body in a reader of its own,
// so a 64 KiB PUT left in three writes whatever the send buffer. When the
// request's context holds the bytes its body reads (withWholeBody) and the
// request sends them as they are (their length, not aws-chunked), Do hands
// net/http those bytes in a *bytes.Reader: the headers and a body that fits
// s3WriteBufferSize leave in one write. It also sets GetBody, so net/http
// may send the PUT again on a fresh connection when a kept-alive one turns
// out closed.
type wholeBodies struct{ next aws.HTTPClient }

func (c wholeBodies) Do(req *http.Request) (*http.Response, error) {
	b, ok := req.Context().Value(wholeBodyKey{}).([]byte)
	if ok && req.Body != nil && req.ContentLength == int64(len(b)) &&
		!strings.Contains(req.Header.Get("Content-Encoding"), "aws-chunked") {
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return c.next.Do(req)
}
