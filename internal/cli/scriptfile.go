package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// maxScriptBytes bounds a local scheduler script: a script names its
// data, it does not carry it.
const maxScriptBytes = 1 << 20

// scriptExt is a file extension kept in the script's key, so that the
// file on the cluster reads as what it is (run.sh -> <sha256>.sh).
var scriptExt = regexp.MustCompile(`^\.[A-Za-z0-9]{1,16}$`)

// openScriptFile opens the local script file p of a --script-file, a
// what ("scheduler", "container") script of at most max bytes: the
// reasons it cannot be one are worded alike for every command.
func openScriptFile(p, what string, max int64) (*os.File, os.FileInfo, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, nil, errors.Unwrap(err) // "no such file or directory", without repeating the path
	}
	st, err := fh.Stat()
	switch {
	case err != nil:
	case !st.Mode().IsRegular():
		err = errors.New("not a regular file")
	case st.Size() == 0:
		err = errors.New("the file is empty")
	case st.Size() > max:
		err = fmt.Errorf("%d bytes; a %s script may have at most %d (put data in S3 and name it with --input)", st.Size(), what, max)
	}
	if err != nil {
		_ = fh.Close()
		return nil, nil, err
	}
	return fh, st, nil
}

// readScript checks the local scheduler script at p and returns it as the
// input object it is stored as.
func readScript(p string) (inputObject, error) {
	fh, st, err := openScriptFile(p, "scheduler", maxScriptBytes)
	if err != nil {
		return inputObject{}, err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return inputObject{}, err
	}
	ext := filepath.Ext(p)
	if !scriptExt.MatchString(ext) {
		ext = ""
	}
	return inputObject{
		flag: "--script-file", path: p, sum: hex.EncodeToString(h.Sum(nil)), size: st.Size(), maxBytes: maxScriptBytes,
		ext: ext, contentType: "application/octet-stream",
	}, nil
}
