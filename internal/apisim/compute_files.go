package apisim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ComputeOutputBytes returns the content a "#SIM output <path> <size>"
// directive writes: a deterministic pseudo-random stream of size bytes
// keyed by the cleaned cluster path, so tests can compare a download
// without keeping the file.
func ComputeOutputBytes(clusterPath string, size int64) io.Reader {
	return ResultBytes("compute-output:"+path.Clean(clusterPath), 0, size)
}

// hostPath maps an absolute cluster path into Root; ".." cannot climb
// above Root.
func (c *Compute) hostPath(p string) (string, error) {
	if c.rootErr != nil {
		return "", fmt.Errorf("file system unavailable: %w", c.rootErr)
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q is not an absolute path", p)
	}
	return filepath.Join(c.root, filepath.FromSlash(path.Clean(p))), nil
}

// File returns the content of the cluster file at clusterPath, for tests
// (read whole: keep it to small files). Jobs due to finish are finished
// first, so their outputs are visible.
func (c *Compute) File(clusterPath string) ([]byte, bool) {
	c.settle(c.cfg.Now())
	hp, err := c.hostPath(clusterPath)
	if err != nil {
		return nil, false
	}
	b, err := os.ReadFile(hp)
	if err != nil {
		return nil, false
	}
	return b, true
}

// maxFormField bounds the non-file fields of an upload.
const maxFormField = 64 << 10

// upload stores the multipart field "file" as <path>/<file name>. The file
// is streamed to a temporary file next to its target and renamed into
// place, so a broken upload leaves nothing behind. cover (see
// overwriteOf) says whether an existing file is replaced; the target
// directory is created if missing.
// openMultipart opens the multipart body of an authorized file request,
// answering the request itself when it cannot (bad token, no file system,
// a body that is not multipart).
func (c *Compute) openMultipart(w http.ResponseWriter, r *http.Request) (*multipart.Reader, bool) {
	if _, ok := c.authorize(w, r); !ok {
		return nil, false
	}
	if c.rootErr != nil {
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "file system unavailable")
		return nil, false
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "body must be multipart/form-data")
		return nil, false
	}
	return mr, true
}

func (c *Compute) upload(w http.ResponseWriter, r *http.Request) {
	mr, ok := c.openMultipart(w, r)
	if !ok {
		return
	}
	var (
		dir, cover, name string
		tmp              *os.File
		sawFile          bool
	)
	defer func() {
		if tmp != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "broken multipart body")
			return
		}
		switch part.FormName() {
		case "path", "cover":
			b, err := io.ReadAll(io.LimitReader(part, maxFormField))
			if err != nil {
				writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "broken multipart body")
				return
			}
			if part.FormName() == "path" {
				dir = string(b)
			} else {
				cover = string(b)
			}
		case "file":
			if sawFile {
				writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "more than one file part")
				return
			}
			sawFile, name = true, part.FileName()
			staging, err := c.hostPath("/.apisim-upload")
			if err == nil {
				err = os.MkdirAll(staging, 0o755)
			}
			if err == nil {
				tmp, err = os.CreateTemp(staging, "part-")
			}
			if err != nil {
				writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot stage the upload")
				return
			}
			if _, err := io.Copy(&countingWriter{w: tmp, c: &c.counters}, part); err != nil {
				writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "broken multipart body")
				return
			}
		}
		_ = part.Close()
	}
	switch {
	case !sawFile:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "file is required")
		return
	case dir == "":
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "path is required")
		return
	case name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == "..":
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "file name "+strconv.Quote(name)+" is not a plain file name")
		return
	}
	overwrite, ok := c.overwriteOf(cover)
	if !ok {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "cover "+strconv.Quote(cover)+" must be cover or uncover")
		return
	}
	if err := tmp.Close(); err != nil {
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot store the upload")
		return
	}
	if c.place(w, tmp.Name(), dir, name, overwrite) {
		tmp = nil
		writeOK(w, nil)
	}
}

// overwriteOf reads the cover field. Platform mode: "cover" overwrites,
// "uncover" or nothing keeps (platform-evidence.md section 3); anything
// else is refused, so a client sending another spelling is caught. Letter
// mode (compute-api.md says only "overwrite indicator"): "cover", "true"
// or "1" overwrite, anything else keeps.
func (c *Compute) overwriteOf(cover string) (overwrite, ok bool) {
	if c.cfg.Letter {
		return cover == "cover" || strings.EqualFold(cover, "true") || cover == "1", true
	}
	switch cover {
	case "cover":
		return true, true
	case "uncover", "":
		return false, true
	}
	return false, false
}

// place renames the staged file tmp into dir/name, refusing to replace an
// existing file unless overwrite. It reports whether it did; if not, it
// has answered.
func (c *Compute) place(w http.ResponseWriter, tmp, dir, name string, overwrite bool) bool {
	hdir, err := c.hostPath(dir)
	if err != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "path "+strconv.Quote(dir)+" is not an absolute path")
		return false
	}
	if c.refuseFile(w, path.Join(dir, name), true) {
		return false
	}
	target := filepath.Join(hdir, name)
	if _, err := os.Stat(target); err == nil && !overwrite {
		writeEnvelopeError(w, http.StatusOK, c.fileCode(ComputeCodeFileExists, ComputeCodeExists), "file "+path.Join(dir, name)+" exists and cover is not set")
		return false
	}
	if err := os.MkdirAll(hdir, 0o755); err != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "cannot create directory "+dir)
		return false
	}
	if err := os.Rename(tmp, target); err != nil {
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot store the upload")
		return false
	}
	return true
}

// countingWriter adds every byte written to "bytes:compute.upload", so a
// test can watch an upload arrive while it is still being sent.
type countingWriter struct {
	w io.Writer
	c *Counters
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.c.Add("bytes:"+EndpointComputeUpload, int64(n))
	return n, err
}

// download streams the file named by the query parameter path
// (URL-decoded) as application/octet-stream with its Content-Length. A
// missing file answers an error envelope (HTTP 200, application/json).
func (c *Compute) download(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.authorize(w, r); !ok {
		return
	}
	c.settle(c.cfg.Now())
	p := r.URL.Query().Get("path")
	hp, err := c.hostPath(p)
	if err != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "path must be an absolute path")
		return
	}
	if c.refuseFile(w, p, false) {
		return
	}
	f, err := os.Open(hp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			writeEnvelopeError(w, http.StatusOK, c.fileCode(ComputeCodeFileMissing, ComputeCodeNotFound), "file "+p+" not found")
			return
		}
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot open the file")
		return
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		writeEnvelopeError(w, http.StatusOK, c.fileCode(ComputeCodeFileMissing, ComputeCodeNotFound), "file "+p+" not found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.Header().Set("Content-Disposition", "attachment; filename="+strconv.Quote(filepath.Base(hp)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// listFiles answers the regular files of a directory under
// data.fileList, each with its name, path and size
// (platform-evidence.md section 3; the entries' fields are this
// simulator's reading). A missing directory answers an empty list.
func (c *Compute) listFiles(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.authorize(w, r); !ok {
		return
	}
	p := r.URL.Query().Get("path")
	hp, err := c.hostPath(p)
	if err != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "path must be an absolute path")
		return
	}
	if c.refuseFile(w, p, false) {
		return
	}
	entries, err := os.ReadDir(hp)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot read the directory")
		return
	}
	files := []map[string]any{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		files = append(files, map[string]any{"name": e.Name(), "path": path.Join(p, e.Name()), "size": info.Size(), "type": "file"})
	}
	writeOK(w, map[string]any{"fileList": files, "total": len(files)})
}

// SetStorageFull makes every upload, chunk and merge answer the
// platform's storage full (911501, HTTP 200; nothing is written) while on.
func (c *Compute) SetStorageFull(on bool) {
	c.fileMu.Lock()
	c.full = on
	c.fileMu.Unlock()
}

// SetStorageFullFor makes every write of the file p (a cluster path)
// answer storage full while on, as a storage that fills between two
// uploads of a job does.
func (c *Compute) SetStorageFullFor(p string, on bool) {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	if c.fullAt == nil {
		c.fullAt = map[string]int{}
	}
	if on {
		c.fullAt[path.Clean(p)] += 0
	} else {
		delete(c.fullAt, path.Clean(p))
	}
}

// StorageFullRefusals is how many writes of p SetStorageFullFor refused.
func (c *Compute) StorageFullRefusals(p string) int {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	return c.fullAt[path.Clean(p)]
}

// DenyFiles makes every file call on dir or below it answer the
// platform's no permission (911030, HTTP 200).
func (c *Compute) DenyFiles(dir string) {
	c.fileMu.Lock()
	c.denied = append(c.denied, path.Clean(dir))
	c.fileMu.Unlock()
}

// refuseFile answers no permission when p (a cluster path) lies under a
// denied directory, and, for a write, storage full while the storage is;
// it reports whether it answered.
func (c *Compute) refuseFile(w http.ResponseWriter, p string, write bool) bool {
	p = path.Clean(p)
	c.fileMu.Lock()
	full, denied := c.full, slices.ContainsFunc(c.denied, func(d string) bool {
		return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
	})
	if _, at := c.fullAt[p]; at && write && !denied {
		c.fullAt[p]++
		full = true
	}
	c.fileMu.Unlock()
	switch {
	case denied:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeNoPermission, "no permission: "+p)
	case write && full:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeStorageFull, "storage full: the user's quota is used up")
	default:
		return false
	}
	return true
}

// fileCode is the code of a file answer: the platform's in platform
// mode, the simulator's own (letter) in Letter mode.
func (c *Compute) fileCode(platform, letter string) string {
	if c.cfg.Letter {
		return letter
	}
	return platform
}
