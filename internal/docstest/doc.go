// Package docstest keeps README.md and the pages under docs/ true to the
// code: its tests derive what must be documented (the SLUICE_* variables,
// the enqueue commands and flags) from the code itself and check every
// relative link, and every docs page (and #anchor) a Go comment names.
// It also holds the code to the length limit docs/development.md states
// for the job path's functions. The job specs shown in the docs are
// validated by internal/jobspec's schema tests.
package docstest
