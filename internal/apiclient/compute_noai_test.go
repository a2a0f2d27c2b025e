package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// A bare 404 to one instance's detail (an instance gone, as some gateways
// answer) says nothing about the region's container service: the next
// container call, for another job, is still sent.
func TestContainerDetail404DoesNotCloseTheRegion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCompute(t, computeOpts{
		client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 1 },
		wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(r.URL.Path, "/gone/detail") {
					http.Error(w, "404 page not found", http.StatusNotFound)
					return
				}
				h.ServeHTTP(w, r)
			})
		},
	})
	s := b.session(t)
	if _, err := s.Instance(ctx, "gone"); err == nil {
		t.Fatal("the detail of an instance answered 404 succeeded")
	}
	if _, err := s.NodeResources(ctx, "gpu", "g1"); err != nil {
		t.Fatalf("NodeResources after one instance's 404: %v (no_container_service: %v)", err, errors.Is(err, apiclient.ErrNoContainerService))
	}
	if _, err := s.Instances(ctx); err != nil {
		t.Fatalf("Instances after one instance's 404: %v", err)
	}
}
