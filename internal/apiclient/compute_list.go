package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// RemoteFile is one entry of a directory on the cluster.
type RemoteFile struct {
	Name string
	// Size in bytes; -1 when the answer gives none.
	Size int64
}

// Files lists the directory dir on the cluster: GET
// {efile}/efile/openapi/v2/file/list?path=dir (platform-evidence.md
// section 3: the files under data.fileList; the entries' fields are not
// shown: a name under name or fileName, a size under size or fileSize, a
// number or a numeric string; low confidence). A caller uses the answer
// to skip work, never to decide that a file is missing.
func (s *ClusterSession) Files(ctx context.Context, dir string) ([]RemoteFile, error) {
	if !strings.HasPrefix(dir, "/") {
		return nil, invalidArg("dir", "must be an absolute path on the cluster")
	}
	res, err := s.c.exchange(ctx, s, &request{
		op: "list files", method: http.MethodGet, svc: svcEfile, auth: true,
		path:  "/efile/openapi/v2/file/list",
		query: url.Values{"path": {dir}},
		class: classIdempotent,
	})
	if err != nil {
		return nil, err
	}
	return decodeFileList(res.data)
}

// decodeFileList reads data.fileList, or data itself when it is a list.
func decodeFileList(data json.RawMessage) ([]RemoteFile, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || isNull(data) {
		return nil, nil
	}
	if data[0] == '{' {
		var page map[string]json.RawMessage
		if err := json.Unmarshal(data, &page); err != nil {
			return nil, fmt.Errorf("apiclient: compute list files: %w: %w", ErrMalformedResponse, err)
		}
		data = field(page, "fileList")
		if data == nil {
			return nil, nil
		}
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("apiclient: compute list files: %w: %w", ErrMalformedResponse, err)
	}
	files := make([]RemoteFile, 0, len(entries))
	for _, e := range entries {
		f := RemoteFile{Size: -1}
		if raw := field(e, "name", "fileName"); raw != nil {
			f.Name, _ = lenientString(raw)
		}
		if raw := field(e, "size", "fileSize"); raw != nil && !isNull(raw) {
			if n, err := lenientInt(raw); err == nil {
				f.Size = n
			}
		}
		files = append(files, f)
	}
	return files, nil
}

// field is the first of keys in m, matched without regard to case.
func field(m map[string]json.RawMessage, keys ...string) json.RawMessage {
	for _, key := range keys {
		for k, v := range m {
			if strings.EqualFold(k, key) {
				return v
			}
		}
	}
	return nil
}
