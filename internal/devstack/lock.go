package devstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the lock file in the data directory. The kernel drops the
// lock when its holder ends, even by a crash, so a stale file holds
// nothing; the file keeps the holder's process id to name it.
const lockName = "sluice.lock"

// lockDataDir takes dir for this process, or says which process holds it:
// two embedded defaults on one directory would run two NATS servers on
// one store.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("devstack: data directory: %w", err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devstack: data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		who := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(holder))); perr == nil {
			who = "process " + strconv.Itoa(pid)
		}
		return nil, fmt.Errorf("devstack: data directory %s is in use by %s (another dev worker?): stop it, or give this one its own SLUICE_DATA_DIR", dir, who)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
