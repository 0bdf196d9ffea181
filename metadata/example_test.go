package metadata_test

import (
	"errors"
	"fmt"

	"github.com/objectstack-fleet/reconciler/metadata"
)

func ExampleParse() {
	body := []byte(`{"name":"scout_task","fields":{
		"subject":{"type":"text","required":true},
		"owner":{"type":"lookup","reference":"users"},
		"parent":{"type":"lookup","reference":"scout_task"}}}`)
	it, err := metadata.Parse("object", "scout_task", body, metadata.Limits{})
	if err != nil {
		panic(err)
	}
	for _, r := range it.Refs {
		fmt.Println(r, metadata.IsCodeObject(r.Name, nil))
	}

	_, err = metadata.Parse("object", "scout_task", []byte(`{"fields":{"owner":{"type":"lookup","reference":7}}}`), metadata.Limits{})
	fmt.Println(err, errors.Is(err, metadata.ErrInvalid))
	// Output:
	// object scout_task false
	// object users false
	// fields.owner.reference must be a string, not a number true
}

func ExampleParse_connector() {
	it, err := metadata.Parse("connector", "crm",
		[]byte(`{"provider":"rest","auth":{"type":"bearer","credentialRef":"crm-token"},"enabled":true}`), metadata.Limits{})
	fmt.Println(it.Credential(), it.Desired, err)
	// Output: crm-token true <nil>
}
