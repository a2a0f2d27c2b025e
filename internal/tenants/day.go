package tenants

import (
	"encoding/json"
	"time"
)

// Day is the value of a ledger key spend.<tenant>.<YYYYMMDD>: the budget
// reservations opened on that day and still open, and the credits spent
// by the jobs settled against them (docs/tenants.md#the-ledger).
type Day struct {
	// Reserved are the open reservations, by job id.
	Reserved map[string]Reservation `json:"reserved,omitempty"`
	// Spent is the credits of the jobs settled, by kind in ByKind.
	Spent  float64            `json:"spent"`
	ByKind map[string]float64 `json:"by_kind,omitempty"`
	// Jobs counts the jobs settled, by kind in JobsByKind (none on days
	// written before it was kept).
	Jobs       int            `json:"jobs"`
	JobsByKind map[string]int `json:"jobs_by_kind,omitempty"`
	// WriteID names the write that stored this value (internal/kvcas).
	WriteID string `json:"write_id,omitempty"`
}

// Reservation is one job's open reservation.
type Reservation struct {
	// Credits is the job's estimated cost.
	Credits float64 `json:"credits"`
	// Kind is the job's kind.
	Kind string `json:"kind"`
	// At is when it was taken.
	At time.Time `json:"at"`
}

// ReservedCredits is the sum of d's open reservations.
func (d Day) ReservedCredits() float64 {
	var sum float64
	for _, r := range d.Reserved {
		sum += r.Credits
	}
	return sum
}

// clone returns a copy of d that shares no map with it.
func (d Day) clone() Day {
	c := d
	c.Reserved = make(map[string]Reservation, len(d.Reserved)+1)
	for k, v := range d.Reserved {
		c.Reserved[k] = v
	}
	c.ByKind = make(map[string]float64, len(d.ByKind)+1)
	for k, v := range d.ByKind {
		c.ByKind[k] = v
	}
	c.JobsByKind = make(map[string]int, len(d.JobsByKind)+1)
	for k, v := range d.JobsByKind {
		c.JobsByKind[k] = v
	}
	return c
}

func jsonMarshal(d Day) ([]byte, error) { return json.Marshal(d) }
