package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version of rheo, the commit it was built from and the Go version (also: rheo --version)",
		details: `The version is the module version when rheo was installed with
go install github.com/rheo-go/rheo/cmd/rheo@VERSION, else "(devel)". The
revision and its time come from the VCS information the go command
stamps into builds made inside a git checkout (go build, go install;
not go run, nor -buildvcs=false); "modified" means the checkout had
uncommitted changes.`,
		noDB: true,
		define: func(fs *flag.FlagSet) func(c *call) error {
			return func(c *call) error {
				info, _ := debug.ReadBuildInfo()
				v := buildVersion(info)
				return c.emit(v, func(w io.Writer) error {
					_, err := fmt.Fprintln(w, v.String())
					return err
				})
			}
		},
	}
}

// versionInfo is what rheo version prints.
type versionInfo struct {
	Version string `json:"version"`
	// Revision, Time and Modified are empty when the build has no VCS
	// information.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// buildVersion reads the version from the build information, which may
// be nil (a binary built without module support).
func buildVersion(info *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info == nil {
		return v
	}
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "GOOS":
			v.Platform = s.Value + v.Platform[strings.Index(v.Platform, "/"):]
		case "GOARCH":
			v.Platform = v.Platform[:strings.Index(v.Platform, "/")+1] + s.Value
		}
	}
	return v
}

// String is the version on one line, such as
// "rheo v1.2.0, revision 5f2c1e0a9b7d (2026-11-29T11:04:00Z), go1.26.8 linux/amd64".
func (v versionInfo) String() string {
	s := "rheo " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += ", revision " + rev
		var notes []string
		if v.Time != "" {
			notes = append(notes, v.Time)
		}
		if v.Modified {
			notes = append(notes, "modified")
		}
		if len(notes) > 0 {
			s += " (" + strings.Join(notes, ", ") + ")"
		}
	}
	return s + ", " + v.Go + " " + v.Platform
}
