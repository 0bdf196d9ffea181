//go:build unix

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImplicitFileMustBeOurs: ./config.yaml found in the working directory
// is read only when nobody else may write it (a shared directory's file
// could point status.token_env at any variable and status.listen at any
// address); --config reads it whatever its mode.
func TestImplicitFileMustBeOurs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	body := []byte("status:\n  listen: 127.0.0.1:23016\n  token_env: AWS_SECRET_ACCESS_KEY\n")
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), body, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, DefaultFile), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Source{}); err == nil || !strings.Contains(err.Error(), "anyone may write it") || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("implicit world-writable config.yaml: %v, want it refused naming --config", err)
	}
	if c, err := Load(Source{File: DefaultFile}); err != nil || c.StatusTokenEnv != "AWS_SECRET_ACCESS_KEY" {
		t.Fatalf("--config config.yaml: %+v %v", c, err)
	}
	if err := os.Chmod(filepath.Join(dir, DefaultFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(Source{}); err != nil || c.StatusTokenEnv != "AWS_SECRET_ACCESS_KEY" {
		t.Fatalf("implicit config.yaml of ours: %+v %v", c, err)
	}
}
