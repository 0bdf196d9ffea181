package hashspec_test

import (
	"fmt"

	"github.com/objectstack-fleet/reconciler/internal/hashspec"
)

func Example() {
	body := []byte(`{"b":1.50,"10":"ten","9":"nine","a":[1e21,-0]}`)
	canonical, _ := hashspec.Canonical(body)
	fmt.Println(string(canonical))
	sum, _ := hashspec.Checksum([]byte(`{"b":1,"a":2}`))
	fmt.Println(sum)
	// Output:
	// {"9":"nine","10":"ten","a":[1e+21,0],"b":1.5}
	// sha256:d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772
}
