package chaos

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/objectstack-fleet/reconciler/internal/proctest"
)

var long = flag.Bool("chaos.long", false, "run the long form of the chaos suite and write chaos/results.md")

var (
	// binary is the reconciler built once for the whole suite.
	binary string
	// canary is the secret every credential of the suite carries; it must
	// never show up anywhere the suite can look.
	canary = "canary-" + randomHex(12)
	// results collects the figures of every scenario.
	results = newFigures()
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := proctest.RunSuite(m, "../cmd/reconciler", "chaos", &binary)
	if results.ran() {
		table := results.markdown(*long)
		if code != 0 {
			table += "\n**The suite failed** (exit code " + fmt.Sprint(code) + "): see the test output for what diverged.\n"
		}
		fmt.Println(table)
		if *long {
			if err := os.WriteFile("results.md", []byte(table), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "write results.md:", err)
				code = 1
			}
		}
		if h := hostileResults.markdown(); h != "" {
			fmt.Println(h)
			if *long {
				if err := os.WriteFile("hostile.md", []byte(h), 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "write hostile.md:", err)
					code = 1
				}
			}
		}
	}
	os.Exit(code)
}

// iterations returns short or long by the suite's form.
func iterations(short, long_ int) int {
	if *long {
		return long_
	}
	return short
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
