package apisim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// chunkedUpload is one identifier's chunks, kept aside (under
// Root/.apisim-chunks) until the merge makes the target appear.
type chunkedUpload struct {
	totalChunks, totalSize, chunkSize int64
	filename, path                    string
	sizes                             map[int64]int64 // chunkNumber → bytes stored
}

// chunkDir is where the chunks of identifier are kept.
func (c *Compute) chunkDir(identifier string) (string, error) {
	staging, err := c.hostPath("/.apisim-chunks")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(identifier))
	return filepath.Join(staging, hex.EncodeToString(sum[:12])), nil
}

// burst receives one chunk (multipart chunkNumber from 1, totalChunks,
// totalSize, chunkSize, currentChunkSize, identifier, filename,
// relativePath, path, cover, then file). A chunk sent again replaces
// itself; the chunk must hold currentChunkSize bytes and agree with the
// earlier chunks of its identifier on the totals, file name and path.
func (c *Compute) burst(w http.ResponseWriter, r *http.Request) {
	mr, ok := c.openMultipart(w, r)
	if !ok {
		return
	}
	fields := map[string]string{}
	var stored int64 = -1
	var tmp string
	defer func() {
		if tmp != "" {
			_ = os.Remove(tmp)
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
		if part.FormName() != "file" {
			b, err := io.ReadAll(io.LimitReader(part, maxFormField))
			if err != nil {
				writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "broken multipart body")
				return
			}
			fields[part.FormName()] = string(b)
			continue
		}
		if fields["identifier"] == "" {
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "identifier is required before the file")
			return
		}
		dir, err := c.chunkDir(fields["identifier"])
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		var f *os.File
		if err == nil {
			f, err = os.CreateTemp(dir, "incoming-")
		}
		if err != nil {
			writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot stage the chunk")
			return
		}
		tmp = f.Name()
		stored, err = io.Copy(&countingWriter{w: f, c: &c.counters}, part)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "broken multipart body")
			return
		}
	}
	num := func(name string) (int64, bool) {
		v, err := strconv.ParseInt(fields[name], 10, 64)
		return v, err == nil
	}
	n, ok1 := num("chunkNumber")
	total, ok2 := num("totalChunks")
	size, ok3 := num("totalSize")
	chunk, ok4 := num("chunkSize")
	current, ok5 := num("currentChunkSize")
	name, dir := fields["filename"], fields["path"]
	_, coverOK := c.overwriteOf(fields["cover"])
	switch {
	case stored < 0:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "file is required")
		return
	case !(ok1 && ok2 && ok3 && ok4 && ok5):
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "chunkNumber, totalChunks, totalSize, chunkSize and currentChunkSize must be numbers")
		return
	case n < 1 || n > total || chunk <= 0 || size < 0:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, fmt.Sprintf("chunkNumber %d is not in 1..%d", n, total))
		return
	case current != stored:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, fmt.Sprintf("chunk %d holds %d bytes, currentChunkSize says %d", n, stored, current))
		return
	case name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == "..":
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "filename "+strconv.Quote(name)+" is not a plain file name")
		return
	case !strings.HasPrefix(dir, "/"):
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "path "+strconv.Quote(dir)+" is not an absolute path")
		return
	case !coverOK:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "cover "+strconv.Quote(fields["cover"])+" must be cover or uncover")
		return
	case c.refuseFile(w, path.Join(dir, name), true):
		return
	}
	hdir, _ := c.chunkDir(fields["identifier"])
	c.mu.Lock()
	defer c.mu.Unlock()
	up := c.uploads[fields["identifier"]]
	if up == nil {
		up = &chunkedUpload{totalChunks: total, totalSize: size, chunkSize: chunk, filename: name, path: dir, sizes: map[int64]int64{}}
		c.uploads[fields["identifier"]] = up
	}
	if up.totalChunks != total || up.totalSize != size || up.chunkSize != chunk || up.filename != name || up.path != dir {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "chunk "+strconv.FormatInt(n, 10)+" disagrees with the earlier chunks of its identifier")
		return
	}
	if err := os.Rename(tmp, filepath.Join(hdir, strconv.FormatInt(n, 10))); err != nil {
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot store the chunk")
		return
	}
	tmp = ""
	up.sizes[n] = stored
	writeOK(w, nil)
}

// merge joins the chunks of identifier (form cover, filename, identifier,
// path, relativePath) into path/filename. Every chunk must be there, each
// but the last of chunkSize bytes, adding up to totalSize; the joined file
// is written aside and renamed into place, so the target appears whole or
// not at all. The chunks are removed once it is in place; after a refusal
// they stay, so the missing ones can still be sent.
func (c *Compute) merge(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.authorize(w, r); !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "body must be a form")
		return
	}
	id, name, dir := r.PostForm.Get("identifier"), r.PostForm.Get("filename"), r.PostForm.Get("path")
	overwrite, ok := c.overwriteOf(r.PostForm.Get("cover"))
	if !ok {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "cover "+strconv.Quote(r.PostForm.Get("cover"))+" must be cover or uncover")
		return
	}
	// One merge at a time: the check, the join and the rename stay
	// consistent with concurrent chunks of the same identifier.
	c.mu.Lock()
	defer c.mu.Unlock()
	up := c.uploads[id]
	switch {
	case id == "" || up == nil:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "identifier "+strconv.Quote(id)+" has no chunks")
		return
	case up.filename != name || up.path != dir:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "filename and path differ from the chunks'")
		return
	}
	var sum int64
	for n := int64(1); n <= up.totalChunks; n++ {
		got, ok := up.sizes[n]
		switch {
		case !ok:
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, fmt.Sprintf("chunk %d of %d is missing", n, up.totalChunks))
			return
		case n < up.totalChunks && got != up.chunkSize:
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, fmt.Sprintf("chunk %d holds %d bytes, not chunkSize %d", n, got, up.chunkSize))
			return
		}
		sum += got
	}
	if sum != up.totalSize {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, fmt.Sprintf("the chunks hold %d bytes, totalSize says %d", sum, up.totalSize))
		return
	}
	hdir, _ := c.chunkDir(id)
	joined, err := c.join(hdir, up.totalChunks)
	if err != nil {
		writeEnvelopeError(w, http.StatusInternalServerError, ComputeCodeInternal, "cannot join the chunks")
		return
	}
	if !c.place(w, joined, dir, name, overwrite) {
		_ = os.Remove(joined)
		return
	}
	delete(c.uploads, id)
	_ = os.RemoveAll(hdir)
	writeOK(w, nil)
}

// join concatenates chunks 1..total of hdir into a new file beside them.
func (c *Compute) join(hdir string, total int64) (string, error) {
	out, err := os.CreateTemp(hdir, "joined-")
	if err != nil {
		return "", err
	}
	for n := int64(1); n <= total && err == nil; n++ {
		var in *os.File
		if in, err = os.Open(filepath.Join(hdir, strconv.FormatInt(n, 10))); err == nil {
			_, err = io.Copy(out, in)
			_ = in.Close()
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}
