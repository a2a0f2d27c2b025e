package artifacts

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"

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

// s3WriteBufferSize is the send buffer of every S3 connection. With
// net/http's default of 4 KiB a PUT went out as its headers and first 4
// KiB, then the rest through a 32 KiB buffer allocated for every request;
// with 128 KiB a PUT of up to about that much (a typical speech file, the
// 64 KiB of the bench's jobs) leaves in one write and allocates nothing,
// and a larger one in 128 KiB writes. It costs 128 KiB per open
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
		o.EndpointResolverV2 = newCachedResolver(cmp.Or(o.EndpointResolverV2, s3.NewDefaultEndpointResolverV2()))
		// Stores that send no checksums (gofakes3, some gateways) would
		// otherwise print a debug line for every download.
		o.DisableLogOutputChecksumValidationSkipped = true
	}), nil
}
