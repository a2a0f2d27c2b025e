package jobspec

import (
	"encoding/json"
	"strings"
	"testing"
)

const validContainer = `{"id":"c-1","kind":"container","container":{
 "instance":{"image":"reg:5000/gpu/admin/base/torch:2.1","version":"torch:2.1","accelerator":"gpu",
  "resource_group":"TeslaM40","cpus":4,"gpus":1,"ram_mb":16384,"timeout":"01:00:00",
  "mounts":[{"source":"/public/home/a/data","target":"/mnt/data"}]},
 "script":"python train.py\n","work_dir":"/public/home/a/run",
 "inputs":[{"from":"s3://bucket-1/k/train.py","to":"/public/home/a/run"}],
 "outputs":["/public/home/a/run/model.bin"]}}`

func TestContainerValid(t *testing.T) {
	s, err := Decode([]byte(validContainer), KindContainer)
	if err != nil {
		t.Fatal(err)
	}
	req := s.Container.Request(ContainerTarget{Name: "sluice-c-1", WorkDir: "/public/home/a/run", StartScript: "#!/bin/bash\n"})
	if req.TimeoutLimit != "01:00:00" || !req.UseStartScript || req.TaskNumber != 1 || len(req.MountInfoList) != 2 ||
		req.MountInfoList[0].SourcePath != "/public/home/a/run" || req.MountInfoList[1].Type != MountData {
		t.Errorf("request = %+v", req)
	}
	if got := s.Container.Instance.TimeoutSeconds(); got != 3600 {
		t.Errorf("timeout = %d s", got)
	}
}

func TestContainerInvalid(t *testing.T) {
	set := func(path string, v any) string {
		var doc map[string]any
		if err := json.Unmarshal([]byte(validContainer), &doc); err != nil {
			t.Fatal(err)
		}
		m := doc
		parts := strings.Split(path, ".")
		for _, p := range parts[:len(parts)-1] {
			m = m[p].(map[string]any)
		}
		if v == nil {
			delete(m, parts[len(parts)-1])
		} else {
			m[parts[len(parts)-1]] = v
		}
		b, _ := json.Marshal(doc)
		return string(b)
	}
	for _, c := range []struct {
		name, doc, path, rule string
	}{
		{"missing timeout", set("container.instance.timeout", nil), "container.instance.timeout", "required"},
		{"unlimited timeout", set("container.instance.timeout", "unlimited"), "container.instance.timeout", "HH:MM:SS"},
		{"zero timeout", set("container.instance.timeout", "00:00:00"), "container.instance.timeout", "longer than zero"},
		{"gpus on cpu", set("container.instance.accelerator", "cpu"), "container.instance.gpus", "must be 0"},
		{"unknown accelerator", set("container.instance.accelerator", "tpu"), "container.instance.accelerator", "must be one of"},
		{"missing image", set("container.instance.image", nil), "container.instance.image", "required"},
		{"zero cpus", set("container.instance.cpus", 0), "container.instance.cpus", "positive"},
		{"relative work_dir", set("container.work_dir", "run"), "container.work_dir", "absolute"},
		{"quoted work_dir", set("container.work_dir", "/a/it's"), "container.work_dir", "must not contain"},
		{"blank script", set("container.script", "  \n"), "container.script", "blank"},
		{"script too large", set("container.script", strings.Repeat("x", MaxContainerScriptBytes+1)), "container.script", "more than the limit"},
		{"missing instance", set("container.instance", nil), "container.instance", "required"},
		{"bad mount type", set("container.instance.mounts", []any{map[string]any{"source": "/a", "target": "/b", "type": "nfs"}}), "container.instance.mounts[0].type", "data or path"},
		{"relative output", set("container.outputs", []any{"model.bin"}), "container.outputs[0]", "absolute"},
		{"unknown field", set("container.gpu", 1), "container.gpu", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc), KindContainer)
			var se *Error
			if err == nil {
				t.Fatal("accepted")
			}
			if !asError(err, &se) {
				t.Fatalf("error %T", err)
			}
			for _, p := range se.Problems {
				if strings.HasPrefix(p.Path, c.path) && strings.Contains(p.Rule, c.rule) {
					return
				}
			}
			t.Errorf("problems %v, want %s: ...%s...", se.Problems, c.path, c.rule)
		})
	}
}

func asError(err error, dst **Error) bool {
	e, ok := err.(*Error)
	*dst = e
	return ok
}
