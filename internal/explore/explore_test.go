package explore

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
)

var (
	seedFlag      = flag.Uint64("explore.seed", 0, "replay only this seed's schedule")
	schedulesFlag = flag.Int("explore.schedules", envInt("EXPLORE_SCHEDULES", 64), "schedules to explore (EXPLORE_SCHEDULES)")
	firstFlag     = flag.Uint64("explore.first", uint64(envInt("EXPLORE_SEED", 1)), "first seed (EXPLORE_SEED)")
	parallelFlag  = flag.Int("explore.parallel", envInt("EXPLORE_PARALLEL", 16), "schedules at once (EXPLORE_PARALLEL); a schedule mostly waits")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestExplore plays the schedules of seeds first..first+schedules-1 (or
// the one of -explore.seed) in parallel and fails on any violation, with
// the seed, its decisions and the command that replays it.
func TestExplore(t *testing.T) {
	s3 := testenv.StartS3(t)
	seeds := []uint64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		for i := range *schedulesFlag {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	var tally Tally
	// Schedules run at once (each in a world of its own): t.Run from
	// several goroutines, not t.Parallel, so -parallel does not bound them.
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range max(1, *parallelFlag) {
		wg.Go(func() {
			for seed := range next {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					res := Run(t, seed, s3)
					tally.Add(res)
					for _, v := range res.Violations {
						t.Errorf("seed %d: %s\n  decisions: %s\n  replay: %s", seed, v, describe(res.Faults), Replay(seed))
					}
				})
			}
		})
	}
	for _, seed := range seeds {
		next <- seed
	}
	close(next)
	wg.Wait()
	t.Logf("explored %d schedules, %d distinct decision points, %d violations", tally.Schedules, tally.Points(), tally.Violations)
}
