package artifacts

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestS3ClientTransport checks the transport NewS3Client builds when no
// HTTP client is given: idle connections for every copy slot, and a send
// buffer that takes a PUT of the usual small object (headers and body) in
// one write instead of 4 KiB and then a 32 KiB buffer allocated per
// request.
func TestS3ClientTransport(t *testing.T) {
	t.Parallel()
	c, err := NewS3Client(context.Background(), S3Config{Endpoint: "http://127.0.0.1:9", AccessKeyID: "k", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	wb, ok := c.Options().HTTPClient.(wholeBodies)
	if !ok {
		t.Fatalf("HTTP client is %T, want wholeBodies", c.Options().HTTPClient)
	}
	bc, ok := wb.next.(*awshttp.BuildableClient)
	if !ok {
		t.Fatalf("HTTP client sends through %T, want the SDK's buildable client", wb.next)
	}
	tr := bc.GetTransport()
	if tr.MaxIdleConnsPerHost != maxIdleS3Conns {
		t.Errorf("MaxIdleConnsPerHost = %d, want %d", tr.MaxIdleConnsPerHost, maxIdleS3Conns)
	}
	if tr.WriteBufferSize < 64<<10+4<<10 {
		t.Errorf("WriteBufferSize = %d: a 64 KiB PUT and its headers do not fit", tr.WriteBufferSize)
	}
}

// TestSmallPutLeavesInOneWrite puts a 64 KiB object through a client from
// NewS3Client against a real S3 server and counts the writes on the
// client's connections: the PUT's headers and body leave in one. Without
// wholeBodies net/http wrote the headers alone and the body in 32 KiB
// pieces (three writes), whatever the send buffer.
func TestSmallPutLeavesInOneWrite(t *testing.T) {
	t.Parallel()
	env := testenv.StartS3(t)
	ctx := context.Background()
	c, err := NewS3Client(ctx, S3Config{Endpoint: env.Endpoint, PathStyle: true,
		Region: s3dev.Region, AccessKeyID: s3dev.AccessKeyID, SecretAccessKey: s3dev.SecretAccessKey})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var writes []int
	o := c.Options()
	wb, ok := o.HTTPClient.(wholeBodies)
	if !ok {
		t.Fatalf("HTTP client is %T, want wholeBodies", o.HTTPClient)
	}
	o.HTTPClient = wholeBodies{wb.next.(*awshttp.BuildableClient).WithTransportOptions(func(tr *http.Transport) {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writeCounter{conn, func(n int) { mu.Lock(); writes = append(writes, n); mu.Unlock() }}, nil
		}
	})}
	s, err := NewStore(StoreConfig{Client: s3.New(o), Bucket: env.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 4<<10)
	a, err := s.Put(ctx, "sluice/video/one-write/out.mp4", "video/mp4", "", bytes.NewReader(body), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(env.Bucket), Key: aws.String(a.Key)})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	if b, _ := io.ReadAll(got.Body); !bytes.Equal(b, body) {
		t.Fatalf("stored %d bytes, not the %d put", len(b), len(body))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) != 1 || writes[0] < len(body) {
		t.Errorf("the PUT left in writes of %v bytes, want one of the headers and the %d-byte body", writes, len(body))
	}
}

// writeCounter is a connection that reports the size of every write.
type writeCounter struct {
	net.Conn
	wrote func(int)
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.wrote(len(p))
	return c.Conn.Write(p)
}

// TestWholeBodiesSendsOnlyTheSameBytes checks that wholeBodies swaps a
// request's body for the bytes its context carries only when the request
// sends those bytes as they are: not for an aws-chunked body (the SDK's
// trailing checksum over HTTPS), not for a length that differs.
func TestWholeBodiesSendsOnlyTheSameBytes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	whole := []byte("0123456789")
	for _, tt := range []struct {
		name     string
		body     string
		encoding string
		want     string
	}{
		{"the same length, plain", "abcdefghij", "", "0123456789"},
		{"aws-chunked", "abcdefghij", "aws-chunked", "abcdefghij"},
		{"another length", "abcdefghijk", "", "abcdefghijk"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := withWholeBody(context.Background(), whole)
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, io.NopCloser(strings.NewReader(tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(tt.body))
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			resp, err := wholeBodies{srv.Client()}.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got, _ := io.ReadAll(resp.Body); string(got) != tt.want {
				t.Errorf("sent %q, want %q", got, tt.want)
			}
		})
	}
}
