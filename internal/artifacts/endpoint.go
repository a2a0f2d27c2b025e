package artifacts

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyauth "github.com/aws/smithy-go/auth"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// endpointCacheSize bounds the endpoints a client remembers: one per
// bucket and client setting in practice (the artifact bucket, and the
// buckets of s3:// inputs it presigns).
const endpointCacheSize = 64

// cachedResolver is the SDK's S3 endpoint resolver with its answers
// remembered. The SDK resolves the endpoint of every request by running
// its rules engine, a generated function whose frame is large enough to
// grow the calling goroutine's stack on most calls: about a sixth of a
// worker's CPU per small artifact (BENCHMARKS.md, "The cost of a job").
// The answer depends on the bucket and the client's settings, never on
// the object: the rules read no Key, Prefix or CopySource
// (TestCachedResolverIgnoresTheObject holds the SDK to that), so those
// are left out of the cache key and every other parameter is in it.
type cachedResolver struct {
	next s3.EndpointResolverV2
	mu   sync.Mutex
	seen map[endpointKey]smithyendpoints.Endpoint
}

// endpointKey is EndpointParameters without the object's parameters.
// Every pointer becomes a value and a presence flag.
type endpointKey struct {
	bucket, region, endpoint             optString
	fips, dualStack, pathStyle           optBool
	accelerate, globalEndpoint           optBool
	objectLambda, noAccessPoints, noMRAP optBool
	arnRegion, expressControl, noExpress optBool
}

type optString struct {
	set bool
	v   string
}

type optBool struct {
	set, v bool
}

func optS(p *string) optString {
	if p == nil {
		return optString{}
	}
	return optString{true, *p}
}

func optB(p *bool) optBool {
	if p == nil {
		return optBool{}
	}
	return optBool{true, *p}
}

func keyOf(p s3.EndpointParameters) endpointKey {
	return endpointKey{
		bucket: optS(p.Bucket), region: optS(p.Region), endpoint: optS(p.Endpoint),
		fips: optB(p.UseFIPS), dualStack: optB(p.UseDualStack), pathStyle: optB(p.ForcePathStyle),
		accelerate: optB(p.Accelerate), globalEndpoint: optB(p.UseGlobalEndpoint),
		objectLambda: optB(p.UseObjectLambdaEndpoint), noAccessPoints: optB(p.DisableAccessPoints),
		noMRAP: optB(p.DisableMultiRegionAccessPoints), arnRegion: optB(p.UseArnRegion),
		expressControl: optB(p.UseS3ExpressControlEndpoint), noExpress: optB(p.DisableS3ExpressSessionAuth),
	}
}

// ResolveEndpoint returns a copy of the remembered endpoint for params, or
// asks the SDK's resolver and remembers its answer (errors are not
// remembered).
func (c *cachedResolver) ResolveEndpoint(ctx context.Context, params s3.EndpointParameters) (smithyendpoints.Endpoint, error) {
	k := keyOf(params)
	c.mu.Lock()
	e, ok := c.seen[k]
	c.mu.Unlock()
	if ok {
		return copyEndpoint(e), nil
	}
	e, err := c.next.ResolveEndpoint(ctx, params)
	if err != nil {
		return e, err
	}
	c.mu.Lock()
	if len(c.seen) < endpointCacheSize {
		c.seen[k] = copyEndpoint(e)
	}
	c.mu.Unlock()
	return e, nil
}

// copyEndpoint copies what the SDK may change in an endpoint it resolved:
// its auth resolver rewrites the auth options in the endpoint's
// properties (their scheme ids and properties) for each request. The URL
// is a value; the headers are copied as well.
func copyEndpoint(e smithyendpoints.Endpoint) smithyendpoints.Endpoint {
	c := smithyendpoints.Endpoint{URI: e.URI, Headers: e.Headers.Clone()}
	c.Properties.SetAll(&e.Properties)
	if opts, ok := smithyauth.GetAuthOptions(&e.Properties); ok {
		copied := make([]*smithyauth.Option, len(opts))
		for i, o := range opts {
			n := &smithyauth.Option{SchemeID: o.SchemeID}
			n.IdentityProperties.SetAll(&o.IdentityProperties)
			n.SignerProperties.SetAll(&o.SignerProperties)
			copied[i] = n
		}
		smithyauth.SetAuthOptions(&c.Properties, copied)
	}
	return c
}

func newCachedResolver(next s3.EndpointResolverV2) *cachedResolver {
	return &cachedResolver{next: next, seen: make(map[endpointKey]smithyendpoints.Endpoint)}
}
