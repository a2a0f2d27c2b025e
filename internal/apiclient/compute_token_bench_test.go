package apiclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// BenchmarkComputeLoginsPerDay counts the logins (and renewals) of one
// client that calls the platform every 5 minutes for b.N simulated days
// with the platform's 24-hour tokens: renewing through tokens/next
// against a platform without it (the documents' letter: tokens/next
// answers 404, so every renewal falls back to a login). It reports
// logins/day and renewals/day; the clock is simulated, so a day takes
// milliseconds.
//
//	go test -run '^$' -bench BenchmarkComputeLoginsPerDay -benchtime 30x ./internal/apiclient
func BenchmarkComputeLoginsPerDay(b *testing.B) {
	for _, renew := range []bool{true, false} {
		name := "renewal"
		if !renew {
			name = "login-only"
		}
		b.Run(name, func(b *testing.B) {
			cb := setupCompute(b, computeOpts{wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !renew && strings.HasSuffix(r.URL.Path, "/tokens/next") {
						http.NotFound(w, r)
						return
					}
					h.ServeHTTP(w, r)
				})
			}})
			ctx := context.Background()
			s, err := cb.client.Cluster(ctx, "")
			if err != nil {
				b.Fatal(err)
			}
			const every = 5 * time.Minute
			days := 0
			for b.Loop() {
				for range int(24 * time.Hour / every) {
					if _, err := s.Clusters(ctx); err != nil {
						b.Fatal(err)
					}
					cb.clock.Advance(every)
				}
				days++
			}
			b.ReportMetric(float64(cb.count("requests:"+apisim.EndpointComputeTokens+":200"))/float64(days), "logins/day")
			b.ReportMetric(float64(cb.count("requests:"+apisim.EndpointComputeTokensNext+":200"))/float64(days), "renewals/day")
			if n := cb.count("requests:" + apisim.EndpointComputeCluster + ":401"); n != 0 {
				b.Errorf("%d calls met an expired token", n)
			}
		})
	}
}
