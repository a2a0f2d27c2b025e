package quota

import "time"

// The fleet's effective limit. An account's real limit of tasks at once
// may be below the configured one (SLUICE_FLEET_MEDIA_TASKS), and upstream
// says so only by refusing a submit (a concurrency conflict, HTTP 433 code
// 10007). Each conflict a worker hears goes on the board with its next
// write, and the board keeps an effective limit that every worker grants
// leases by, as TCP keeps its congestion window:
//
//   - Multiplicative decrease: a conflict cuts the effective limit to
//     three quarters of the leases in use (or of the effective limit, if
//     fewer are in use), at most once per Window, and never for a
//     refused submit whose lease was granted before the last cut, so
//     that the burst of conflicts one over-commit brings cuts once. The level cut from is
//     remembered (the ceiling): the account refused a task there. Within
//     or without the window, the limit never stays above the leases in
//     use less those of the refused submits: a refused submit's lease
//     holds no task, so the account refused with at most that many
//     upstream.
//   - Additive increase: after Raise without a conflict, and a round of
//     grants (as many as the effective limit) showing the limit in use,
//     it grows by one, up to one below the ceiling; to the ceiling and
//     past it only after Probe and four rounds (a probe). A probe that
//     brings a conflict falls back one step instead of cutting: the
//     level below held. Reaching the configured limit forgets it all.
//
// A fleet configured above its account's limit so settles just under it,
// refusals coming only once per probe.

// AIMD paces the effective limit.
type AIMD struct {
	// Window is how long after a cut further conflicts cut no more.
	// Defaults to 2s.
	Window time.Duration
	// Raise is the quiet (no conflict) before one step up below the
	// ceiling. Defaults to 5s.
	Raise time.Duration
	// Probe is the quiet before a step to the ceiling or past it.
	// Defaults to 2 minutes.
	Probe time.Duration
}

var defaultAIMD = AIMD{Window: 2 * time.Second, Raise: 5 * time.Second, Probe: 2 * time.Minute}

func (a AIMD) withDefaults() AIMD {
	if a.Window <= 0 {
		a.Window = defaultAIMD.Window
	}
	if a.Raise <= 0 {
		a.Raise = defaultAIMD.Raise
	}
	if a.Probe <= 0 {
		a.Probe = defaultAIMD.Probe
	}
	return a
}

// probeRounds is how many rounds of grants a probe needs.
const probeRounds = 4

// pace is the effective limit on the board and what paces it.
type pace struct {
	// Effective is the limit leases are granted by; 0 is the configured
	// limit (of each writer).
	Effective int `json:"effective,omitempty"`
	// Ceiling is the level the last cut was made from: a task was refused
	// there. 0: none known.
	Ceiling int `json:"ceiling,omitempty"`
	// CutAt is when (Unix milliseconds) the last cut was made, QuietAt
	// when the last conflict or change was.
	CutAt   int64 `json:"cut_at,omitempty"`
	QuietAt int64 `json:"quiet_at,omitempty"`
	// Granted counts the leases granted since QuietAt.
	Granted int `json:"granted,omitempty"`
	// Probing: the last step went to the ceiling or past it.
	Probing bool `json:"probing,omitempty"`
}

// conflict is one submit upstream refused for too many tasks at once:
// its job, and when (Unix milliseconds, on the boards' clock) the worker
// was granted the job's lease; 0 when it does not know.
type conflict struct {
	job     string
	granted int64
}

// effective is the limit granted by on a board, for a writer configured
// with limit.
func (p pace) effective(limit int) int {
	if p.Effective > 0 {
		return min(p.Effective, limit)
	}
	return limit
}

// countGrants counts n leases granted.
func (p *pace) countGrants(n int) { p.Granted += n }

// planLimit applies in's conflicts, or the quiet since the last one, to
// next's effective limit; next's leases are those in use before in's
// releases (the refused job's lease among them).
func planLimit(next *board, in intent) {
	now, a := in.now.UnixMilli(), in.aimd.withDefaults()
	p := &next.pace
	eff := p.effective(in.limit)
	switch {
	case len(in.conflicts) > 0:
		// Each refused submit holds a lease and no task: the account
		// refused with at most the rest of the leases' tasks upstream.
		// Only the refused leases still on the board count, so that a
		// write planned again after its releases landed cuts no lower.
		// A refused submit whose lease was granted before the last cut
		// is of the over-commit that cut was for, however late it was
		// sent (its submit queued behind a rate): only a lease granted
		// since, by the lowered limit, shows a new one.
		refused, fresh := 0, false
		for _, c := range in.conflicts {
			if _, ok := next.Leases[c.job]; ok {
				refused++
			}
			fresh = fresh || c.granted == 0 || c.granted >= p.CutAt
		}
		bound := max(len(next.Leases)-refused, 1)
		if now-p.CutAt < a.Window.Milliseconds() || !fresh {
			// The same over-commit: no second cut, only the bound; the
			// quiet starts again.
			p.Effective = min(eff, bound)
			p.QuietAt, p.Granted = now, 0
			return
		}
		from := min(eff, max(len(next.Leases), 1))
		to := max(from*3/4, 1)
		if p.Probing {
			to = max(eff-1, 1)
		}
		*p = pace{Effective: min(to, bound), Ceiling: from, CutAt: now, QuietAt: now}
	case p.Effective > 0:
		probe := p.Ceiling > 0 && eff+1 >= p.Ceiling
		quiet, rounds := a.Raise, 1
		if probe {
			quiet, rounds = a.Probe, probeRounds
		}
		if now-p.QuietAt < quiet.Milliseconds() || p.Granted < rounds*eff {
			return
		}
		if eff+1 >= in.limit {
			*p = pace{}
			return
		}
		if eff+1 > p.Ceiling {
			p.Ceiling = 0
		}
		p.Effective, p.QuietAt, p.Granted, p.Probing = eff+1, now, 0, probe
	}
}
