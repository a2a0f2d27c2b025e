package models

import (
	"encoding/json"
	"fmt"
	"time"
)

// Key is the key of SLUICE_TENANTS under which each worker writes, at
// start, the catalog it loaded: the catalog in force, which enqueue
// validates with and enqueue models shows.
const Key = "models"

// The sources of a catalog in force.
const (
	SourceShipped = "shipped"
	SourceFile    = "file"
)

// Published is the catalog in force as a worker wrote it.
type Published struct {
	// Catalog is the whole catalog, shipped entries included.
	Catalog *Catalog `json:"catalog"`
	// Source is SourceShipped, or SourceFile when the worker read
	// SLUICE_MEDIA_MODELS.
	Source string `json:"source"`
	// File is the path SLUICE_MEDIA_MODELS named, on the worker's host.
	File string `json:"file,omitempty"`
	// Worker is the name of the worker that wrote it.
	Worker string `json:"worker"`
	// WrittenAt is when it was written.
	WrittenAt time.Time `json:"written_at"`
}

// DecodePublished reads a published catalog and checks it as a file.
func DecodePublished(data []byte) (*Published, error) {
	var p struct {
		Published
		Catalog json.RawMessage `json:"catalog"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("published model catalog: %w", err)
	}
	c, err := parse(p.Catalog, "published by worker "+p.Worker)
	if err != nil {
		return nil, err
	}
	out := p.Published
	out.Catalog = c
	return &out, nil
}

// EntryView is an entry as shown: with the price rule of each resolution
// (its Prices hides the entry's, which may leave some out).
type EntryView struct {
	Entry
	// Prices maps each resolution to its price rule.
	Prices map[string]string `json:"prices"`
}

// CatalogView is a catalog as shown (enqueue models --json).
type CatalogView struct {
	Default EntryView            `json:"default"`
	Models  map[string]EntryView `json:"models"`
}

// View returns the catalog as shown.
func (c *Catalog) View() CatalogView {
	v := CatalogView{Default: EntryView{c.Default, c.Default.PriceRules()}, Models: map[string]EntryView{}}
	for n, e := range c.Models {
		v.Models[n] = EntryView{e, e.PriceRules()}
	}
	return v
}
