package jobclient

import (
	"reflect"
	"testing"
)

func TestClassOfSubject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		subject string
		want    ClassWaiting
		ok      bool
	}{
		{"sluice.jobs.video.q.1.team-a", ClassWaiting{Kind: "video", Priority: 1, Tenant: "team-a"}, true},
		{"sluice.jobs.container.q.5.default", ClassWaiting{Kind: "container", Priority: 5, Tenant: "default"}, true},
		{"sluice.jobs.video", ClassWaiting{}, false},          // the intake
		{"sluice.jobs.video.q.3", ClassWaiting{}, false},      // no tenant
		{"sluice.jobs.video.q.3.", ClassWaiting{}, false},     // empty tenant
		{"sluice.jobs.video.q.0.a", ClassWaiting{}, false},    // priority out of range
		{"sluice.jobs.video.q.6.a", ClassWaiting{}, false},    // priority out of range
		{"sluice.jobs.video.q.03.a", ClassWaiting{}, false},   // not written plainly
		{"sluice.jobs.video.q.high.a", ClassWaiting{}, false}, // not a number
		{"sluice.jobs.video.x.3.a", ClassWaiting{}, false},    // not a class queue
		{"sluice.jobs.audio.q.3.a", ClassWaiting{}, false},    // unknown kind
		{"sluice.jobs.video.q.3.a.b", ClassWaiting{}, false},  // one token too many
		{"sluice.events.video.q.3.a", ClassWaiting{}, false},  // another stream's subject
		{"xsluice.jobs.video.q.3.a", ClassWaiting{}, false},   // not the prefix
		{"sluice.jobs.speech.q.2.Team_B", ClassWaiting{Kind: "speech", Priority: 2, Tenant: "Team_B"}, true},
	} {
		got, ok := classOfSubject(tc.subject)
		if ok != tc.ok || got != tc.want {
			t.Errorf("classOfSubject(%q) = %+v, %v; want %+v, %v", tc.subject, got, ok, tc.want, tc.ok)
		}
	}
}

func TestClassesOfSubjects(t *testing.T) {
	t.Parallel()
	got := classesOfSubjects(map[string]uint64{
		"sluice.jobs.video":              7, // the intake is not a class
		"sluice.jobs.speech.q.3.b":       2,
		"sluice.jobs.video.q.3.b":        4,
		"sluice.jobs.video.q.1.b":        1,
		"sluice.jobs.compute.q.2.a":      9,
		"sluice.jobs.video.q.2.a":        0, // empty: left out
		"sluice.jobs.unknown.q.1.a":      3,
		"sluice.jobs.container.q.5.zeta": 6,
	})
	want := []ClassWaiting{
		{Kind: "compute", Priority: 2, Tenant: "a", Messages: 9},
		{Kind: "video", Priority: 1, Tenant: "b", Messages: 1},
		{Kind: "video", Priority: 3, Tenant: "b", Messages: 4},
		{Kind: "speech", Priority: 3, Tenant: "b", Messages: 2},
		{Kind: "container", Priority: 5, Tenant: "zeta", Messages: 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("classesOfSubjects = %+v\nwant %+v", got, want)
	}
}
