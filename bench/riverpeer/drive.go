package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// DriveResult is what "drive" prints after RESULT, as JSON.
type DriveResult struct {
	Jobs      int `json:"jobs"`
	Completed int `json:"completed"`
	// Unsuccessful counts jobs discarded or cancelled.
	Unsuccessful int `json:"unsuccessful"`
	// ElapsedNS runs from the first insert call to the commit of the last
	// completion (batch mode).
	ElapsedNS int64 `json:"elapsed_ns"`
	// LatenciesNS are, one by one, each job's insert call to the commit of
	// its completion, the warm-up jobs left out (-one-by-one).
	LatenciesNS []int64 `json:"latencies_ns,omitempty"`
	// Snoozes is the mean number of snoozes per completed job.
	Snoozes float64 `json:"snoozes"`
}

// runDrive enqueues video jobs into a database the worker works and waits
// until each is finalized. Completion times are the commit timestamps of
// the jobs' last updates (the server runs with track_commit_timestamp=on),
// so the observer's polling adds nothing to them.
func runDrive(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("drive", flag.ExitOnError)
	dbURL := fs.String("db", "", "Postgres URL of the worker's database")
	n := fs.Int("n", 2000, "jobs")
	prefix := fs.String("prefix", "river", "job id prefix")
	directives := fs.String("directives", "[sim:duration=0s]", "simulator directives added to each prompt")
	oneByOne := fs.Bool("one-by-one", false, "insert each job when the last one is finalized, and report each one's latency")
	warmup := fs.Int("warmup", 5, "with -one-by-one: jobs run first and not counted")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	_ = fs.Parse(args)
	if *dbURL == "" || *n <= 0 {
		return errors.New("drive: -db and a positive -n are required")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	// An insert-only client: no queues, no workers.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return err
	}
	job := func(i int) VideoArgs {
		id := fmt.Sprintf("%s-%05d", *prefix, i)
		video, _ := json.Marshal(map[string]any{
			"model":      "video-model",
			"input":      map[string]any{"prompt": "a paper boat drifting down a rain gutter, job " + id + " " + *directives},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		})
		return VideoArgs{JobID: id, Video: video}
	}
	var res DriveResult
	if *oneByOne {
		res, err = driveOneByOne(ctx, client, pool, *n, *warmup, job)
	} else {
		res, err = driveBatch(ctx, client, pool, *n, job)
	}
	if err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, `SELECT coalesce(avg((metadata->>'snoozes')::int), 0) FROM river_job WHERE state = 'completed'`).Scan(&res.Snoozes); err != nil {
		return err
	}
	b, _ := json.Marshal(res)
	fmt.Println("RESULT", string(b))
	return nil
}

// driveBatch inserts n jobs in one InsertMany and polls every 100 ms until
// every job is finalized.
func driveBatch(ctx context.Context, client *river.Client[pgx.Tx], pool *pgxpool.Pool, n int, job func(int) VideoArgs) (DriveResult, error) {
	res := DriveResult{Jobs: n}
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: job(i)}
	}
	start := time.Now()
	if _, err := client.InsertMany(ctx, params); err != nil {
		return res, fmt.Errorf("insert: %w", err)
	}
	for {
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'completed'),
			count(*) FILTER (WHERE state IN ('discarded', 'cancelled')) FROM river_job`).Scan(&res.Completed, &res.Unsuccessful); err != nil {
			return res, err
		}
		if res.Completed+res.Unsuccessful >= n {
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("%d of %d jobs finalized: %w", res.Completed+res.Unsuccessful, n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	var last time.Time
	if err := pool.QueryRow(ctx, `SELECT max(pg_xact_commit_timestamp(xmin)) FROM river_job`).Scan(&last); err != nil {
		return res, fmt.Errorf("commit timestamps (is track_commit_timestamp on?): %w", err)
	}
	res.ElapsedNS = int64(last.Sub(start))
	return res, nil
}

// driveOneByOne inserts one job at a time, polling its row every 2 ms
// until it is finalized.
func driveOneByOne(ctx context.Context, client *river.Client[pgx.Tx], pool *pgxpool.Pool, n, warmup int, job func(int) VideoArgs) (DriveResult, error) {
	res := DriveResult{Jobs: n}
	for i := range n + warmup {
		start := time.Now()
		ins, err := client.Insert(ctx, job(i), nil)
		if err != nil {
			return res, fmt.Errorf("insert: %w", err)
		}
		for {
			var state string
			var committed *time.Time
			if err := pool.QueryRow(ctx, `SELECT state, pg_xact_commit_timestamp(xmin) FROM river_job WHERE id = $1`, ins.Job.ID).Scan(&state, &committed); err != nil {
				return res, fmt.Errorf("commit timestamps (is track_commit_timestamp on?): %w", err)
			}
			if state == "completed" || state == "discarded" || state == "cancelled" {
				if state != "completed" {
					res.Unsuccessful++
				} else {
					res.Completed++
				}
				if i >= warmup && committed != nil {
					res.LatenciesNS = append(res.LatenciesNS, int64(committed.Sub(start)))
					var created, attempted, finalized time.Time
					if err := pool.QueryRow(ctx, `SELECT created_at, attempted_at, finalized_at FROM river_job WHERE id = $1`, ins.Job.ID).Scan(&created, &attempted, &finalized); err == nil {
						// The job's way, on stderr (the log): inserted, last fetched, finished working, committed.
						fmt.Fprintf(os.Stderr, "job %d: created +%s, last fetched +%s, finalized +%s, committed +%s\n", ins.Job.ID,
							created.Sub(start).Round(time.Microsecond), attempted.Sub(start).Round(time.Microsecond),
							finalized.Sub(start).Round(time.Microsecond), committed.Sub(start).Round(time.Microsecond))
					}
				}
				break
			}
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("job %d not finalized: %w", ins.Job.ID, ctx.Err())
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	return res, nil
}
