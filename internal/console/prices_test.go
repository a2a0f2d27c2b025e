package console_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestTenantsPageShowsPrices: the Tenants page shows the price table its
// costs and budgets are counted by, one row per rule.
func TestTenantsPageShowsPrices(t *testing.T) {
	t.Parallel()
	base, _, n := serve(t, token)
	ctx := testenv.Context(t, 30*time.Second)
	jc, err := jobclient.New(n.Conn, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jc.SetPrices(ctx, map[string]float64{"video.768P.second": 0.5, "speech.char": 0.0002}, models.Shipped()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/console/tenants")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	section := regexp.MustCompile(`(?s)<section[^>]*id="prices".*?</section>`).FindString(string(b))
	text := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(section, " ")), " ")
	for _, want := range []string{"speech.char 0.0002", "video.768P.second 0.5"} {
		if !strings.Contains(text, want) {
			t.Errorf("price table lacks %q: %q", want, text)
		}
	}
}
