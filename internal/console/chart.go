package console

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/tenants"
)

// chartDays is how many UTC days a spend chart shows, today included.
const chartDays = 30

// The spend chart's box, in SVG user units: the plot and, around it,
// room for the scale on the left and the dates below.
const (
	chartWidth  = 640
	chartHeight = 150
	chartLeft   = 48
	chartTop    = 8
	chartBottom = 22
)

// chart is a tenant's spend per day, drawn by the template as inline
// SVG: the page stays one document with no script and no image fetched,
// which the console's Content-Security-Policy asks for. Coordinates are
// preformatted so that the template only places them.
type chart struct {
	Width, Height int
	// Left, Right, Top and Base bound the plot.
	Left, Right, Top, Base string
	// Max labels the top of the scale, in credits.
	Max string
	// First and Last are the dates of the first and last day shown.
	First, Last string
	// FirstX and LastX are the centres of the first and last day's slot.
	FirstX, LastX string
	// Bars are the days with spend or reservations, oldest first.
	Bars []chartBar
	// BudgetY is the height of a daily budget, "" without one.
	BudgetY string
	// Total is the credits spent over the days shown.
	Total string
}

// chartBar is one day: spent credits from the base, reserved ones above.
type chartBar struct {
	X, W, Y, H string
	// ReservedY and ReservedH are the reserved part, ReservedH "" when
	// nothing is reserved.
	ReservedY, ReservedH string
	// Title is the day in words, shown on hover.
	Title string
}

// dayKey names a UTC day in a chart's days.
func dayKey(t time.Time) string { return t.UTC().Format("2006-01-02") }

// spendChart draws the chartDays days up to now's from days (ledger days
// by dayKey). The scale's top is the largest day, or a daily budget when
// larger, which is then drawn as a line.
func spendChart(days map[string]tenants.Day, budget *tenants.Budget, now time.Time) chart {
	today := tenants.PeriodStart(tenants.PerDay, now)
	start := today.AddDate(0, 0, -(chartDays - 1))
	daily := budget != nil && budget.Per == tenants.PerDay
	top := 0.0
	for i := range chartDays {
		d := days[dayKey(start.AddDate(0, 0, i))]
		top = max(top, d.Spent+d.ReservedCredits())
	}
	if daily {
		top = max(top, budget.Credits)
	}
	if top <= 0 {
		top = 1
	}
	plot := float64(chartHeight - chartTop - chartBottom)
	base := float64(chartHeight - chartBottom)
	slot := float64(chartWidth-chartLeft) / chartDays
	height := func(credits float64) float64 {
		if credits <= 0 {
			return 0
		}
		return max(credits/top*plot, 1) // a tiny spend still shows
	}
	c := chart{Width: chartWidth, Height: chartHeight, Left: num(chartLeft), Right: num(chartWidth), Top: num(chartTop),
		Base: num(base), Max: tenants.Credits(top), First: start.Format("Jan 2"), Last: today.Format("Jan 2"),
		FirstX: num(chartLeft + slot/2), LastX: num(chartLeft + slot*(chartDays-0.5))}
	if daily {
		c.BudgetY = num(base - height(budget.Credits))
	}
	var total float64
	for i := range chartDays {
		day := start.AddDate(0, 0, i)
		d, ok := days[dayKey(day)]
		reserved := d.ReservedCredits()
		if !ok || d.Spent+reserved <= 0 {
			continue
		}
		total += d.Spent
		hs, hr := height(d.Spent), height(reserved)
		b := chartBar{X: num(chartLeft + slot*float64(i) + slot*0.15), W: num(slot * 0.7),
			Y: num(base - hs), H: num(hs),
			Title: fmt.Sprintf("%s: %s credits spent by %d jobs, %s reserved by %d open", dayKey(day),
				tenants.Credits(d.Spent), d.Jobs, tenants.Credits(reserved), len(d.Reserved))}
		if hr > 0 {
			b.ReservedY, b.ReservedH = num(base-hs-hr), num(hr)
		}
		c.Bars = append(c.Bars, b)
	}
	c.Total = tenants.Credits(total)
	return c
}

// num writes a coordinate with one decimal, enough for a screen.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
