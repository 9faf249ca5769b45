package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuildVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"a release installed with go install, from a clean checkout", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/rheo-go/rheo", Version: "v1.2.0"},
			Settings: []debug.BuildSetting{
				{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
				{Key: "vcs.revision", Value: "5f2c1e0a9b7d3c4e5f60718293a4b5c6d7e8f901"},
				{Key: "vcs.time", Value: "2026-11-29T11:04:00Z"}, {Key: "vcs.modified", Value: "false"},
			},
		}, "rheo v1.2.0, revision 5f2c1e0a9b7d (2026-11-29T11:04:00Z), go1.26.8 linux/arm64"},
		{"a build of a checkout with changes", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/rheo-go/rheo", Version: "(devel)"},
			Settings: []debug.BuildSetting{
				{Key: "GOOS", Value: "darwin"}, {Key: "GOARCH", Value: "amd64"},
				{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
			},
		}, "rheo (devel), revision abc123 (modified), go1.26.8 darwin/amd64"},
		{"a build without VCS information", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Settings:  []debug.BuildSetting{{Key: "GOOS", Value: "windows"}, {Key: "GOARCH", Value: "386"}},
		}, "rheo (devel), go1.26.8 windows/386"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, buildVersion(tt.info).String())
		})
	}
}
