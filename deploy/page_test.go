package deploy

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

// chromium runs headless Chromium with args; it fails the test with how to
// get it when it is missing.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("chromium not found on PATH: install it (Debian: apt-get install chromium) to test the status page")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, path, all...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestStatusPageInChromium runs the demo (its connector crm held: upstream
// refuses the credential) with a status token, and renders GET / in headless
// Chromium, signed in with the token as the Basic password: the DOM shows
// the held connector with its reason, the counts, the fleet row, and a
// screenshot is taken (STATUS_PAGE_SCREENSHOT=path keeps it).
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	const token = "page-token-canary-5f1d"
	dm := startDemo(t, []string{"STATUS_TOKEN=" + token}, "--status.token_env", "STATUS_TOKEN")
	dm.d.waitReady(60 * time.Second)
	// The heartbeat row (the fleet table) and the held connector.
	proctest.Eventually(t, 30*time.Second, 100*time.Millisecond, "crm held and a heartbeat", func() bool {
		code, body := dm.d.get("/", "Authorization", "Bearer "+token)
		return code == http.StatusOK && strings.Contains(body, "refused upstream: 401") && strings.Contains(body, `<td class="mono">demo</td>`)
	})
	if code, _ := dm.d.get("/"); code != http.StatusUnauthorized {
		t.Fatalf("GET / without the token: %d, want 401", code)
	}

	url := "http://reader:" + token + "@" + dm.d.addr + "/"
	dom := string(chromium(t, "--dump-dom", url))
	for _, want := range []string{
		"reconciler <span class=\"mono\">demo</span>",
		`<a href="/item?kind=connector&amp;key=crm">crm</a>`, // a not-ready entry links to its explanation
		"refused upstream: 401",
		`id="counts"`, `id="not-ready"`, `id="fleet"`,
		"No replica is driven",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("Chromium's DOM lacks %q", want)
		}
	}
	// The held connector's row carries its state and reason together.
	row := ""
	for _, tr := range strings.Split(dom, "<tr>") {
		if strings.Contains(tr, `key=crm">crm</a></td>`) {
			row = tr
		}
	}
	if !strings.Contains(row, ">held<") || !strings.Contains(row, "refused upstream: 401") {
		t.Errorf("crm's row: %q", row)
	}
	if strings.Contains(dom, token) {
		t.Error("the token is on the page")
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}

	shot := filepath.Join(t.TempDir(), "status-page.png")
	if keep := os.Getenv("STATUS_PAGE_SCREENSHOT"); keep != "" {
		shot = keep
	}
	chromium(t, "--screenshot="+shot, "--window-size=1280,1400", "--hide-scrollbars", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1400 {
		t.Errorf("screenshot is %v, want 1280×1400", b)
	}
	// Not blank: a rendered page has many colours (text, badges).
	seen := map[uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 7 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(seen) < 8 {
		t.Errorf("screenshot looks blank (%d colours)", len(seen))
	}
}
