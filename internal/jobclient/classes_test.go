package jobclient

import (
	"reflect"
	"testing"
)

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
