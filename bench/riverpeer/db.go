package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// dbName is what -create and -drop accept: the harness names its
// databases, and the name goes into SQL unquoted.
var dbName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// runDB creates a database and applies River's migrations to it, or drops
// one. -url is a database of the same server to connect to first (the
// server may still be starting: it is retried for -wait).
func runDB(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("db", flag.ExitOnError)
	admin := fs.String("url", "", "URL of an existing database on the server (e.g. postgres://user@127.0.0.1:5432/postgres)")
	create := fs.String("create", "", "database to create and migrate")
	drop := fs.String("drop", "", "database to drop")
	wait := fs.Duration("wait", 30*time.Second, "how long to retry the first connection while the server starts")
	_ = fs.Parse(args)
	if *admin == "" || (*create == "") == (*drop == "") {
		return errors.New("db: -url and exactly one of -create or -drop are required")
	}
	name := *create + *drop
	if !dbName.MatchString(name) {
		return fmt.Errorf("db: database name %q: want lower-case letters, digits and _", name)
	}
	conn, err := connectRetry(ctx, *admin, *wait)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if *drop != "" {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(*admin)
	if err != nil {
		return fmt.Errorf("db: -url: %w", err)
	}
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// connectRetry connects to url, retrying every 100 ms for up to wait.
func connectRetry(ctx context.Context, url string, wait time.Duration) (*pgx.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to postgres: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
